package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/internal/testutil"
)

// TestGatewayCommand: print-config, check and usage errors; then a gateway
// in front of our broker's TCP listener carries `iotq pub` over QUIC, and
// cancelling the context (what SIGTERM does) stops it with exit 0.
func TestGatewayCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	state := filepath.Join(dir, "state")

	code, out, errs := runCLI(ctx, "gateway", "--route", "quic://127.0.0.1:0?alpn=amqp=tcp://127.0.0.1:5672", "--state-dir", state, "--print-config")
	if code != 0 || !strings.Contains(out, "early_data: alpn") || !strings.Contains(out, "- amqp") {
		t.Fatalf("print-config: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := runCLI(ctx, "gateway", "--route", "quic://127.0.0.1:0=udp://x:1"); code != 2 || !strings.Contains(errs, "tcp://") {
		t.Fatalf("bad route: exit %d: %s", code, errs)
	}
	if code, _, errs := runCLI(ctx, "gateway"); code != 2 || !strings.Contains(errs, "no route") {
		t.Fatalf("no route: exit %d: %s", code, errs)
	}
	// --check builds the gateway and closes it: one line, no "gateway stopped"
	// for a gateway that never ran.
	if code, out, errs := runCLI(ctx, "gateway", "--route", "quic://127.0.0.1:0?alpn=amqp=tcp://127.0.0.1:5672", "--state-dir", state, "--check"); code != 0 || strings.TrimSpace(out) != "configuration OK" || errs != "" {
		t.Fatalf("--check: exit %d\nstdout %q\nstderr %q", code, out, errs)
	}
	cfg := filepath.Join(dir, "gw.yaml")
	_ = os.WriteFile(cfg, []byte("routes:\n  - listen: quic://127.0.0.1:0\n    upstreams: [tcp://127.0.0.1:1]\n    balance: random\n"), 0o600)
	if code, _, errs := runCLI(ctx, "gateway", "--config", cfg, "--check"); code != 1 || !strings.Contains(errs, "gw.yaml:4: routes[0].balance") {
		t.Fatalf("bad config: exit %d: %s", code, errs)
	}

	srv := brokertest.Start(t, broker.Options{})
	up := strings.Replace(brokertest.Endpoint(t, srv, "mqtt"), "mqtt://", "tcp://", 1)
	ready := filepath.Join(dir, "ready.json")
	gctx, stop := context.WithCancel(ctx)
	defer stop()
	gw := startCLI(gctx, "gateway", "--route", "quic://127.0.0.1:0="+up, "--state-dir", state, "--ready-file", ready, "--metrics", "127.0.0.1:0")
	waitFile(t, ready)
	var rf struct {
		Listeners []string `json:"listeners"`
		CAFile    string   `json:"ca_file"`
	}
	b, _ := os.ReadFile(ready)
	if err := json.Unmarshal(b, &rf); err != nil || len(rf.Listeners) != 1 {
		t.Fatalf("ready file %s: %v", b, err)
	}
	code, out, errs = runCLI(ctx, "pub", "--url", rf.Listeners[0], "--ca", rf.CAFile, "-t", "gw/cli", "-m", "hi", "-q", "1", "--stats", "json")
	if code != 0 {
		t.Fatalf("pub through the gateway: exit %d\n%s%s", code, out, errs)
	}
	stop()
	gw.wait(t)
	if gw.code != 0 || !strings.Contains(gw.errb.String(), "gateway stopped") {
		t.Fatalf("gateway exit %d\n%s", gw.code, gw.errb.String())
	}
}

// TestAMQPPubSubThroughGateway: `iotq sub` and `iotq pub` with amqp+quic://
// URLs, through `iotq gateway` to an embedded ActiveMQ Artemis, with the
// same flags and records as MQTT; --early with a ticket pipelines the AMQP
// start into the 0-RTT flight (the route accepts 0-RTT) and its message is
// acknowledged like the others.
func TestAMQPPubSubThroughGateway(t *testing.T) {
	art := testutil.StartArtemis(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	gready := filepath.Join(dir, "gw.json")
	up := strings.Replace(art.URL(), "amqp://", "tcp://", 1)
	gctx, stop := context.WithCancel(ctx)
	defer stop()
	gw := startCLI(gctx, "gateway", "--route", "quic://127.0.0.1:0?alpn=amqp&early_data=accept="+up, "--state-dir", filepath.Join(dir, "state"), "--ready-file", gready)
	waitFile(t, gready)
	var rf struct {
		Listeners []string `json:"listeners"`
		CAFile    string   `json:"ca_file"`
	}
	b, _ := os.ReadFile(gready)
	if err := json.Unmarshal(b, &rf); err != nil || len(rf.Listeners) != 1 {
		t.Fatalf("ready file %s: %v", b, err)
	}
	url := strings.Replace(rf.Listeners[0], "quic://", "amqp+quic://", 1)
	sready := filepath.Join(dir, "sub.ready")
	records := filepath.Join(dir, "sub.csv")
	sub := startCLI(ctx, "sub", "--url", url, "--ca", rf.CAFile, "-t", "lab.e8", "-n", "9", "--timeout", "30s",
		"--stats", "json", "--quiet", "--ready-file", sready, "--records", records)
	waitFile(t, sready)
	code, out, errs := runCLI(ctx, "pub", "--url", url, "--ca", rf.CAFile, "-t", "lab.e8", "--size", "64", "-n", "5", "-q", "1", "--stats", "json")
	if code != 0 {
		t.Fatalf("pub: exit %d\n%s%s", code, out, errs)
	}
	if st := lastJSON(t, out); st["acked"] != float64(5) || st["protocol"] != "amqp/1.0" {
		t.Fatalf("pub stats %v", st)
	}
	tickets := filepath.Join(dir, "tickets")
	for i, want0RTT := range []bool{false, true} {
		code, out, errs := runCLI(ctx, "pub", "--url", url, "--ca", rf.CAFile, "--session-cache", tickets, "--early",
			"-t", "lab.e8", "--size", "64", "-n", "2", "-q", "1", "--stats", "json")
		if code != 0 {
			t.Fatalf("pub --early %d: exit %d\n%s%s", i, code, out, errs)
		}
		if st := lastJSON(t, out); st["acked"] != float64(2) || st["used_0rtt"] != want0RTT || st["early_sent_ns"] == nil {
			t.Fatalf("pub --early %d: stats %v", i, st)
		}
	}
	sub.wait(t)
	if sub.code != 0 {
		t.Fatalf("sub: exit %d: %s", sub.code, sub.errb.String())
	}
	if st := lastJSON(t, sub.out.String()); st["received"] != float64(9) || st["measured"] != float64(9) {
		t.Fatalf("sub stats %v", st)
	}
	if rows := readCSV(t, records); len(rows) != 10 {
		t.Fatalf("records: %d rows, want header + 9", len(rows))
	}
	stop()
	gw.wait(t)
}

// TestGatewayUpstreamDownMessage: with the broker behind a route down,
// the client's error is the gateway's reason, naming the broker of the
// route's protocol, without the client's own hint about its port or
// protocol (which would send an AMQP user to look at MQTT, or at a port
// that is right) (issue 22 item 3).
func TestGatewayUpstreamDownMessage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	dead := fmt.Sprintf("tcp://127.0.0.1:%d", testutil.FreePort(t)) // nothing listens there
	ready := filepath.Join(dir, "ready.json")
	gctx, stop := context.WithCancel(ctx)
	defer stop()
	gw := startCLI(gctx, "gateway", "--state-dir", filepath.Join(dir, "state"), "--ready-file", ready,
		"--route", "quic://127.0.0.1:0?alpn=amqp="+dead, "--route", "quic://127.0.0.1:0="+dead)
	waitFile(t, ready)
	var rf struct {
		Listeners []string `json:"listeners"`
		CAFile    string   `json:"ca_file"`
	}
	b, _ := os.ReadFile(ready)
	if err := json.Unmarshal(b, &rf); err != nil || len(rf.Listeners) != 2 {
		t.Fatalf("ready file %s: %v", b, err)
	}
	amqpURL := strings.Replace(rf.Listeners[0], "quic://", "amqp+quic://", 1)
	for _, c := range []struct {
		name string
		args []string
		want string
		not  []string
	}{
		{"amqp", []string{"--url", amqpURL}, "could not connect to the AMQP broker behind this route", []string{"MQTT", "is it an AMQP 1.0 broker"}},
		{"mqtt 3.1.1", []string{"--url", rf.Listeners[1]}, "could not connect to the MQTT broker behind this route", []string{"AMQP", "check that the port serves MQTT"}},
		{"mqtt 5", []string{"--url", rf.Listeners[1], "--protocol", "5"}, "could not connect to the MQTT broker behind this route", []string{"AMQP", "check that the port serves MQTT"}},
	} {
		code, _, stderr := runCLI(ctx, append([]string{"pub", "--ca", rf.CAFile, "-t", "a", "-m", "x", "--timeout", "10s"}, c.args...)...)
		if code != exitFailure || !strings.Contains(stderr, "0x101") || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want 1, 0x101 and %q", c.name, code, stderr, c.want)
		}
		for _, n := range c.not {
			if strings.Contains(stderr, n) {
				t.Errorf("%s: stderr %q mentions %q", c.name, stderr, n)
			}
		}
	}
	stop()
	gw.wait(t)
}
