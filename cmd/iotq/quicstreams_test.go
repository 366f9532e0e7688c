package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
)

// TestQUICStreamStrategyFlags: pub and sub with --quic-stream-strategy
// (each strategy) and --quic-datagrams against our broker (datagram
// delivery on): every message arrives, --stats json names the strategy
// and, for the datagram subscriber, that datagrams were negotiated.
func TestQUICStreamStrategyFlags(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{
		Listen: []string{"quic://127.0.0.1:0"},
		QUIC:   broker.QUICOptions{DatagramDelivery: true},
	})
	url := brokertest.Endpoint(t, srv, "quic")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, tc := range []struct {
		strategy string
		qos      string
		dgrams   bool
		streams  float64 // the publisher's data streams
	}{
		{"control", "1", false, 0},
		{"per-topic", "1", false, 1},
		{"per-publish", "2", false, 5},
		{"per-topic", "0", true, 0},
	} {
		name := tc.strategy + "/qos" + tc.qos
		if tc.dgrams {
			name += "/datagrams"
		}
		t.Run(name, func(t *testing.T) {
			flags := []string{"--url", url, "--ca", srv.CAFile(), "--quic-stream-strategy", tc.strategy, "-q", tc.qos, "--stats", "json"}
			if tc.dgrams {
				flags = append(flags, "--quic-datagrams")
			}
			topic := "qs/" + strings.ReplaceAll(name, "/", "-")
			ready := filepath.Join(t.TempDir(), "ready")
			sub := startCLI(ctx, append([]string{"sub", "-t", topic, "-n", "5", "--timeout", "30s", "--quiet", "--ready-file", ready}, flags...)...)
			waitFile(t, ready)
			// The publisher stays until the subscriber has everything: QoS
			// 0 over datagrams has no acknowledgement to wait for.
			code, out, errs := runCLI(ctx, append([]string{"pub", "-t", topic, "-n", "5", "--size", "32"}, flags...)...)
			if code != exitOK {
				t.Fatalf("pub: exit %d: %s", code, errs)
			}
			sub.wait(t)
			if sub.code != exitOK {
				t.Fatalf("sub: exit %d: %s", sub.code, sub.errb.String())
			}
			for role, s := range map[string]string{"pub": out, "sub": sub.out.String()} {
				st := lastJSON(t, s)
				if st["quic_stream_strategy"] != tc.strategy {
					t.Errorf("%s: quic_stream_strategy %v, want %s", role, st["quic_stream_strategy"], tc.strategy)
				}
				if dg, _ := st["quic_datagrams"].(bool); dg != tc.dgrams {
					t.Errorf("%s: quic_datagrams %v, want %v", role, st["quic_datagrams"], tc.dgrams)
				}
			}
			if st := lastJSON(t, sub.out.String()); st["received"] != 5.0 {
				t.Fatalf("sub received %v, want 5", st["received"])
			}
			pq, _ := lastJSON(t, out)["quic"].(map[string]any)
			sq, _ := lastJSON(t, sub.out.String())["quic"].(map[string]any)
			if n, _ := pq["data_streams"].(float64); n != tc.streams {
				t.Errorf("pub opened %v data streams, want %v", pq["data_streams"], tc.streams)
			}
			if tc.dgrams && (pq["datagrams_sent"] != 5.0 || sq["datagrams_received"] != 5.0) {
				t.Errorf("datagrams: pub sent %v, sub received %v; want 5 and 5", pq["datagrams_sent"], sq["datagrams_received"])
			}
		})
	}
}

// TestQUICStreamFlagsRefused: a strategy that does not exist, and the QUIC
// flags on a URL that is not MQTT over QUIC, are usage errors that name
// the flag.
func TestQUICStreamFlagsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, args := range [][]string{
		{"pub", "--url", "quic://127.0.0.1:1", "-t", "a", "--quic-stream-strategy", "per-stream"},
		{"sub", "--url", "mqtt://127.0.0.1:1", "-t", "a", "--quic-stream-strategy", "per-topic"},
		{"pub", "--url", "coap+quic://127.0.0.1:1", "-t", "a", "--quic-datagrams"},
	} {
		code, _, errs := runCLI(ctx, args...)
		if code != exitUsage || !strings.Contains(errs, "--quic-") {
			t.Errorf("%v: exit %d, stderr %q; want %d naming the flag", args, code, errs, exitUsage)
		}
	}
}
