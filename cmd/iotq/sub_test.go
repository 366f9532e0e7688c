package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
)

// TestPubSubOverQUICWith0RTT: pub and sub over every transport of our
// broker; over QUIC a second pub with the same --session-cache reports
// used_0rtt and tls_resumed in --stats json and its message is delivered.
func TestPubSubOverQUICWith0RTT(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{
		Listen:   []string{"mqtt://127.0.0.1:0", "mqtts://127.0.0.1:0", "wss://127.0.0.1:0", "quic://127.0.0.1:0"},
		StateDir: t.TempDir(),
	})
	ca := srv.CAFile()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	sub := startCLI(ctx, "sub", "--url", brokertest.Endpoint(t, srv, "mqtt"), "-t", "z/#", "-q", "1", "-n", "6",
		"--timeout", "20s", "--stats", "json", "--quiet", "--ready-file", ready)
	waitFile(t, ready)

	cache := filepath.Join(dir, "tickets")
	runs := []struct {
		scheme   string
		want0RTT bool
		resumed  bool
	}{
		{"mqtts", false, false},
		{"wss", false, false},
		{"quic", false, false},
		{"quic", true, true},
		{"mqtts", false, true}, // TLS over TCP resumes from the same file, no early data
		{"quic", true, true},   // --early: PUBLISH in the 0-RTT flight with CONNECT
	}
	for i, r := range runs {
		args := []string{"pub", "--url", brokertest.Endpoint(t, srv, r.scheme), "--ca", ca, "--session-cache", cache,
			"-t", fmt.Sprintf("z/%d", i), "--size", "32", "--stats", "json"}
		if i == len(runs)-1 {
			args = append(args, "--early", "-q", "0")
		} else {
			args = append(args, "-q", "1")
		}
		code, out, errOut := runCLI(ctx, args...)
		if code != 0 {
			t.Fatalf("run %d (%s): exit %d: %s", i, r.scheme, code, errOut)
		}
		st := lastJSON(t, out)
		if st["transport"] != r.scheme || st["used_0rtt"] != r.want0RTT || st["tls_resumed"] != r.resumed || st["acked"] != 1.0 {
			t.Fatalf("run %d (%s): stats transport %v used_0rtt %v tls_resumed %v acked %v; want %s %v %v 1",
				i, r.scheme, st["transport"], st["used_0rtt"], st["tls_resumed"], st["acked"], r.scheme, r.want0RTT, r.resumed)
		}
		if r.scheme == "quic" && st["quic"] == nil {
			t.Fatalf("run %d: no quic stats", i)
		}
		if i == len(runs)-1 {
			early, _ := st["early_sent_ns"].(float64)
			if early == 0 || early > st["connack_ns"].(float64) {
				t.Fatalf("--early: early_sent_ns %v, connack_ns %v", st["early_sent_ns"], st["connack_ns"])
			}
		}
	}
	sub.wait(t)
	if sub.code != 0 {
		t.Fatalf("sub exit %d: %s", sub.code, sub.errb.String())
	}
	if st := lastJSON(t, sub.out.String()); st["received"] != 6.0 {
		t.Fatalf("sub received %v, want 6", st["received"])
	}
}
