package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/internal/protonbroker"
	"github.com/iotq/iotq/internal/testutil"
)

// TestAMQPEarlyBothBrokers: `iotq pub --early -q 1` against ActiveMQ
// Artemis and the Qpid Proton broker (Proton-C enforces the session window
// the old early start violated): directly over TCP and over QUIC through
// `iotq gateway` (route accepting 0-RTT for amqp), twice with a ticket
// file, the second run reporting used_0rtt true; a subscriber gets every
// message.
func TestAMQPEarlyBothBrokers(t *testing.T) {
	for _, name := range []string{"artemis", "proton"} {
		t.Run(name, func(t *testing.T) {
			var url string
			if name == "artemis" {
				url = testutil.StartArtemis(t, false).URL()
			} else {
				url = testutil.StartProton(t, protonbroker.Options{}).URL()
			}
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(90*time.Second))
			defer cancel()
			dir := t.TempDir()
			gready := filepath.Join(dir, "gw.json")
			gctx, stop := context.WithCancel(ctx)
			defer stop()
			gw := startCLI(gctx, "gateway", "--route", "quic://127.0.0.1:0?alpn=amqp&early_data=accept="+strings.Replace(url, "amqp://", "tcp://", 1),
				"--state-dir", filepath.Join(dir, "state"), "--ready-file", gready)
			waitFile(t, gready)
			var rf struct {
				Listeners []string `json:"listeners"`
				CAFile    string   `json:"ca_file"`
			}
			b, _ := os.ReadFile(gready)
			if err := json.Unmarshal(b, &rf); err != nil || len(rf.Listeners) != 1 {
				t.Fatalf("ready file %s: %v", b, err)
			}
			quicURL := strings.Replace(rf.Listeners[0], "quic://", "amqp+quic://", 1)
			sready := filepath.Join(dir, "sub.ready")
			sub := startCLI(ctx, "sub", "--url", url, "-t", "iotq.early.cli", "-n", "6", "--timeout", "60s",
				"--stats", "json", "--quiet", "--ready-file", sready)
			waitFile(t, sready)
			tickets := filepath.Join(dir, "tickets")
			for i, run := range []struct {
				url   string
				extra []string
				rtt   bool
			}{
				{url, nil, false},
				{quicURL, []string{"--ca", rf.CAFile, "--session-cache", tickets}, false},
				{quicURL, []string{"--ca", rf.CAFile, "--session-cache", tickets}, true},
			} {
				args := append([]string{"pub", "--url", run.url, "--early", "-t", "iotq.early.cli", "--size", "64", "-n", "2", "-q", "1", "--stats", "json"}, run.extra...)
				code, out, errs := runCLI(ctx, args...)
				if code != 0 {
					t.Fatalf("pub --early %d (%s): exit %d\n%s%s", i, run.url, code, out, errs)
				}
				if st := lastJSON(t, out); st["acked"] != float64(2) || st["used_0rtt"] != run.rtt || st["early_sent_ns"] == nil {
					t.Fatalf("pub --early %d (%s): stats %v", i, run.url, st)
				}
			}
			sub.wait(t)
			if sub.code != 0 {
				t.Fatalf("sub: exit %d: %s", sub.code, sub.errb.String())
			}
			if st := lastJSON(t, sub.out.String()); st["received"] != float64(6) {
				t.Fatalf("sub stats %v", st)
			}
			stop()
			gw.wait(t)
		})
	}
}
