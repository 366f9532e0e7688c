package main

import (
	"context"
	"io"
	"net/http"
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
		Listen:  []string{"quic://127.0.0.1:0"},
		QUIC:    broker.QUICOptions{DatagramDelivery: true},
		Metrics: "127.0.0.1:0",
	})
	url := brokertest.Endpoint(t, srv, "quic")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, tc := range []struct {
		strategy string
		qos      string
		dgrams   bool
		streams  float64 // the publisher's data streams
		size     string
	}{
		{"control", "1", false, 0, "32"},
		{"per-topic", "1", false, 1, "32"},
		{"per-publish", "2", false, 5, "32"},
		{"per-topic", "0", true, 0, "32"},
		{"per-topic", "0", true, 1, "4000"}, // too large for a datagram: on a stream
	} {
		name := tc.strategy + "/qos" + tc.qos
		if tc.dgrams {
			name += "/datagrams/" + tc.size
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
			code, out, errs := runCLI(ctx, append([]string{"pub", "-t", topic, "-n", "5", "--size", tc.size}, flags...)...)
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
			sent, _ := pq["datagrams_sent"].(float64)
			recv, _ := sq["datagrams_received"].(float64)
			if want := map[bool]float64{true: 5}[tc.dgrams && tc.size == "32"]; sent != want || recv != want {
				t.Errorf("datagrams: pub sent %v, sub received %v; want %v and %v", sent, recv, want, want)
			}
		})
	}
	checkDatagramMetrics(t, srv.MetricsAddr().String())
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

// checkDatagramMetrics: the broker counted the datagram cases of
// TestQUICStreamStrategyFlags: 5 small QoS 0 messages received as
// datagrams and delivered as datagrams, none dropped, and 5 deliveries too
// large for a datagram sent on a stream.
func checkDatagramMetrics(t *testing.T, metricsAddr string) {
	t.Helper()
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for key, want := range map[string]string{
		`iotq_broker_quic_datagrams_received_total{result="delivered"}`: "5",
		`iotq_broker_quic_datagrams_received_total{result="dropped"}`:   "0",
		`iotq_broker_quic_datagrams_sent_total{result="sent"}`:          "5",
		`iotq_broker_quic_datagrams_sent_total{result="too_large"}`:     "5",
	} {
		if !strings.Contains(string(b), "\n"+key+" "+want+"\n") {
			t.Errorf("metric %s: want %s; metrics:\n%s", key, want, grepLines(string(b), "datagrams"))
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
