package report

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/iotq/iotq/records"
)

// TestPathChangeTableComparisonsAndFigure: E10 rows of a TCP+TLS and a
// QUIC cell (five repetitions each) give one table row per cell with
// summed counts, gap and first-message comparisons whose intervals come
// from the repetitions (QUIC's gap a tenth of TCP's: QUIC better), the
// lines in words and the figure.
func TestPathChangeTableComparisonsAndFigure(t *testing.T) {
	dir := t.TempDir()
	w, err := records.Create[records.Message](filepath.Join(dir, records.FileMessages))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	write := func(cell, tr string, rep int, gapMs int64, reconnects, dup int) {
		d := filepath.Join(dir, "cells", cell, "rep-"+strconv.Itoa(rep))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		w, err := records.Create[records.E10Row](filepath.Join(d, records.FileE10))
		if err != nil {
			t.Fatal(err)
		}
		r := records.E10Row{Cell: cell, Experiment: "E10", Rep: rep, Transport: tr, PathChange: "rebind", Profile: "wifi",
			LinkRTTNs: 25e6, ChangeLinkRTTNs: 25e6, ChangeNs: 1, ChangeAtNs: 30e9, Sent: 600, Acknowledged: 600, Delivered: 600,
			Duplicated: dup, GapNs: gapMs * 1e6, GapBeforeNs: 110e6, FirstAfterNs: (gapMs - 50) * 1e6, Reconnects: reconnects,
			DropNAT: 3}
		if reconnects > 0 {
			r.ReconnectNs, r.ReconnectResumed, r.Resent = 200e6, true, dup+1
		}
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for rep := 1; rep <= 5; rep++ {
		write("E10_wifi_loss0_path-change_rebind_qos1_100B_mqtts", "mqtts", rep, 1000+int64(rep)*20, 1, 1)
		write("E10_wifi_loss0_path-change_rebind_qos1_100B_quic", "quic", rep, 100+int64(rep)*2, 0, 0)
	}
	out := filepath.Join(dir, "report")
	s, err := Generate(context.Background(), Options{Dir: dir, Out: out, Resamples: 500})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.PathChange) != 2 {
		t.Fatalf("%d path change results, want 2", len(s.PathChange))
	}
	m, q := s.PathChange[0], s.PathChange[1]
	if m.Transport != "mqtts" || m.Reps != 5 || m.Reconnects != 5 || m.Resumed != 5 || m.Duplicated != 5 || m.DropNAT != 15 || m.Resent != 10 {
		t.Errorf("mqtts: %+v", m)
	}
	if q.Transport != "quic" || q.Reconnects != 0 || q.Lost != 0 || q.GapS.Estimate < 0.1 || q.GapS.Estimate > 0.11 {
		t.Errorf("quic: %+v", q)
	}
	var gap *Comparison
	for _, c := range s.Comparisons {
		if c.Metric == MetricGapCut {
			gap = c
		}
	}
	if gap == nil || gap.Start != "rebind" || !gap.Within || gap.Verdict != VerdictQUICBetter || gap.Estimate < 85 || gap.Estimate > 95 || !(gap.Lo <= gap.Estimate && gap.Estimate <= gap.Hi) {
		t.Fatalf("gap comparison %+v", gap)
	}
	md, err := os.ReadFile(filepath.Join(out, FileMarkdown))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Path change (E10)", "| E10 | wifi | 0 | rebind | 25.0 | 25.0 | quic | 5 | 3000 | 3000 | 0 | 0 | 0 |",
		"0 reconnections in 5 repetitions", "delivery gap around a path change"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if _, err := os.Stat(filepath.Join(out, DirFigures, "path-change-gap.png")); err != nil {
		t.Errorf("figure: %v", err)
	}
}
