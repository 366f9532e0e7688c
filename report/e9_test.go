package report

import (
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeE9Fixture writes a results directory of multi-topic cells (wifi,
// loss 0 and 5 %, QoS 0; TCP+TLS, QUIC one stream, per-topic streams, one
// stream + datagrams; with and without the large topic) whose delays show
// head-of-line blocking by construction: beside the large topic every 10th
// periodic message of TCP+TLS and of one QUIC stream waits 200 ms more,
// per-topic streams do not; datagrams lose every 10th periodic message at
// 5 % loss.
func writeE9Fixture(t *testing.T, dir string) {
	t.Helper()
	cells := newCSV(t, dir, "cells.csv", "cell", "experiment", "profile", "loss_pct", "transport", "qos", "pattern", "size",
		"interval_ns", "messages", "repetitions", "pub_delay_ns", "pub_rate_bps", "sub_delay_ns", "sub_rate_bps", "status",
		"quic_streams", "topics", "large_size", "large_interval_ns")
	msgs := newCSV(t, dir, "messages.csv", "cell", "rep", "protocol", "transport", "qos", "seq", "size", "send_ns", "recv_ns", "delay_ns", "node", "topic")
	const t0 = int64(1_800_000_000_000_000_000)
	for _, l := range []float64{0, 5} {
		for _, large := range []bool{false, true} {
			for _, v := range []struct{ tr, streams, id string }{
				{"mqtts", "", "mqtts"}, {"quic", "control", "quic"}, {"quic", "per-topic", "quic_per-topic"}, {"quic", "control+datagrams", "quic_dgram"},
			} {
				id := fmt.Sprintf("E9_wifi_loss%g_egress_multi-topic_qos0_100B_every100ms_topics3", l)
				ls, li := 0, int64(0)
				if large {
					id += "_large65536B-every2s"
					ls, li = 65536, 2_000_000_000
				}
				id += "_" + v.id
				cells.row(id, "E9", "wifi", l, v.tr, 0, "multi-topic", 100, 100_000_000, 40, 1, 25_000_000, 20_000_000, 0, 100_000_000, "ok",
					v.streams, 3, ls, li)
				seq := 0
				for j := range 40 {
					for k := range 3 {
						send := t0 + int64(seq)*33_000_000
						d := int64(30_000_000 + (seq%7)*1_000_000)
						if large && j%10 == 3 && v.streams != "per-topic" {
							d += 200_000_000 // behind the large message on a shared stream
						}
						recv, delay := fmt.Sprint(send+d), fmt.Sprint(d)
						if l > 0 && strings.HasSuffix(v.streams, "+datagrams") && j%10 == 0 {
							recv, delay = "", "" // a datagram lost
						}
						msgs.row(id, 1, "mqtt", v.tr, 0, seq, 100, send, recv, delay, "pub", fmt.Sprintf("lab/1/m/%d", k))
						seq++
					}
					if large && j%20 == 0 {
						send := t0 + int64(seq)*33_000_000
						msgs.row(id, 1, "mqtt", v.tr, 0, seq, 65536, send, send+300_000_000, 300_000_000, "pub", "lab/1/m/large")
						seq++
					}
				}
			}
		}
	}
	cells.close(t)
	msgs.close(t)
}

// TestE9Report: the per-topic table pools the periodic topics and gives
// the large topic a row of its own, tables.csv carries both, and the
// headline comparisons find what the fixture built in: the large topic
// raises the p99 of the shared stream, per-topic streams lower it, and
// datagrams deliver less at loss.
func TestE9Report(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "results")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeE9Fixture(t, dir)
	s, out := generate(t, dir, Options{Resamples: 400})
	var periodic, large int
	row := func(cell, class string) *HOLRow {
		for _, r := range s.HOL {
			if r.Cell == cell && r.Class == class {
				return r
			}
		}
		t.Fatalf("no %s row of %s", class, cell)
		return nil
	}
	for _, r := range s.HOL {
		switch r.Class {
		case ClassPeriodic:
			periodic++
			if r.Topics != 3 || r.Published != 120 {
				t.Errorf("%s periodic: %d topics, %d published", r.Cell, r.Topics, r.Published)
			}
		case ClassLarge:
			large++
			if r.Topics != 1 || r.Published != 2 || r.P50Ms != 300 {
				t.Errorf("%s large: %+v", r.Cell, r)
			}
		}
	}
	if periodic != 16 || large != 8 {
		t.Fatalf("%d periodic and %d large rows, want 16 and 8", periodic, large)
	}
	const pre = "E9_wifi_loss5_egress_multi-topic_qos0_100B_every100ms_topics3_large65536B-every2s_"
	tcp, pt, dg := row(pre+"mqtts", ClassPeriodic), row(pre+"quic_per-topic", ClassPeriodic), row(pre+"quic_dgram", ClassPeriodic)
	if tcp.Variant != "TCP+TLS" || !(tcp.P99Ms > 200) || !(tcp.MaxMs > 230) || pt.Variant != "QUIC per-topic streams" || !(pt.P99Ms < 40) {
		t.Errorf("TCP %+v\nper-topic %+v", tcp, pt)
	}
	if dg.Variant != "QUIC single stream + datagrams" || dg.Delivered != 108 || dg.DeliveryRatio != 0.9 {
		t.Errorf("datagrams %+v", dg)
	}
	find := func(q, base, variant, large, loss string) *HOLComparison {
		for _, c := range s.HOLComparisons {
			if c.Question == q && c.Baseline == base && c.Variant == variant && c.Large == large && c.Loss == loss {
				return c
			}
		}
		t.Fatalf("no comparison %s %s -> %s %s %s among %d", q, base, variant, large, loss, len(s.HOLComparisons))
		return nil
	}
	if c := find(QuestionLarge, "without large topic", "TCP+TLS", "", "with loss"); c.Verdict != "higher" || !c.Within || c.Configurations != 1 {
		t.Errorf("large topic over TCP: %+v", c)
	}
	if c := find(QuestionLarge, "without large topic", "QUIC per-topic streams", "", "with loss"); c.Verdict == "higher" {
		t.Errorf("large topic over per-topic streams: %+v", c)
	}
	if c := find(QuestionTransport, "QUIC single stream", "QUIC per-topic streams", "with large topic", "with loss"); c.Verdict != "lower" || !(c.Estimate < 0.5) {
		t.Errorf("per-topic vs one stream: %+v", c)
	}
	if c := find(QuestionTransport, "TCP+TLS", "QUIC per-topic streams", "with large topic", "none"); c.Verdict != "lower" {
		t.Errorf("per-topic vs TCP: %+v", c)
	}
	if c := find(QuestionDatagrams, "QUIC single stream", "QUIC single stream + datagrams", "", "with loss"); c.Metric != MetricDeliveryRatio ||
		c.Verdict != "lower" || math.Abs(c.VariantValue-0.9) > 1e-9 {
		t.Errorf("datagrams: %+v", c)
	}

	md, err := os.ReadFile(filepath.Join(out, FileMarkdown))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"## Head-of-line blocking: one-way delay per topic (E9)", "## Head-of-line blocking: headline comparisons",
		"E9, with loss: beside a large-message topic the periodic topics' p99 delay over TCP+TLS is",
		"QoS 0: the periodic topics' delivery ratio over QUIC single stream + datagrams is 0.90 x"} {
		if !strings.Contains(string(md), w) {
			t.Errorf("report.md lacks %q", w)
		}
	}
	f, err := os.Open(filepath.Join(out, FileTables))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	head := recs[0]
	p99, lp50 := slices.Index(head, "hol_periodic_p99_ms"), slices.Index(head, "hol_large_p50_ms")
	if p99 < 0 || lp50 < 0 {
		t.Fatalf("tables.csv header %v", head)
	}
	for _, r := range recs[1:] {
		if r[0] == pre+"mqtts" && (r[p99] == "" || r[lp50] != "300.000000") {
			t.Errorf("tables.csv row %s: p99 %q large p50 %q", r[0], r[p99], r[lp50])
		}
	}
	var figs []string
	for _, fg := range s.Figures {
		figs = append(figs, fg.Name)
	}
	for _, w := range []string{"e9-p99-wifi-large", "e9-p99-wifi"} {
		if !slices.Contains(figs, w) {
			t.Errorf("no figure %s among %v", w, figs)
		}
	}
}
