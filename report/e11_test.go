package report

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iotq/iotq/records"
)

// TestFailoverTableAndFigure: E11 rows of two cells (three repetitions of
// quic, two of mqtts) give one table row per cell with summed counts, the
// mean recovery time with a bootstrap interval around it, and both
// figures.
func TestFailoverTableAndFigure(t *testing.T) {
	dir := t.TempDir()
	w, err := records.Create[records.Message](filepath.Join(dir, records.FileMessages))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	write := func(cell, tr string, rep int, recoverMs, lost int) {
		d := filepath.Join(dir, "cells", cell, "rep-"+string(rune('0'+rep)))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		w, err := records.Create[records.E11Row](filepath.Join(d, records.FileE11))
		if err != nil {
			t.Fatal(err)
		}
		r := records.E11Row{Cell: cell, Experiment: "E11", Rep: rep, Transport: tr, Profile: "wifi", LinkRTTNs: 25e6,
			Sent: 100, Acknowledged: 98, Delivered: 99, Lost: lost, Duplicated: 1, UnackedDelivered: 1,
			KillNs: 1, RecoverNs: int64(recoverMs) * 1e6, GapNs: int64(recoverMs+100) * 1e6, Connections: 2, Reconnects0RTT: 1}
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for rep, ms := range []int{100, 200, 300} {
		write("E11_wifi_quic", "quic", rep+1, ms, 0)
	}
	write("E11_wifi_mqtts", "mqtts", 1, 1000, 0)
	write("E11_wifi_mqtts", "mqtts", 2, 3000, 1)
	out := filepath.Join(dir, "report")
	s, err := Generate(context.Background(), Options{Dir: dir, Out: out, Resamples: 500})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Failover) != 2 {
		t.Fatalf("%d failover results, want 2", len(s.Failover))
	}
	q := s.Failover[1]
	if q.Transport != "quic" || q.Reps != 3 || q.Sent != 300 || q.Lost != 0 || q.Reconnects != 3 || q.Reconnects0RTT != 3 {
		t.Errorf("quic: %+v", q)
	}
	if math.Abs(q.RecoverS.Estimate-0.2) > 1e-9 || !(q.RecoverS.Lo >= 0.1 && q.RecoverS.Lo < 0.2 && q.RecoverS.Hi > 0.2 && q.RecoverS.Hi <= 0.3) {
		t.Errorf("quic recover %+v; want mean 0.2 s inside [0.1, 0.3]", q.RecoverS)
	}
	if m := s.Failover[0]; m.Transport != "mqtts" || m.Lost != 1 || math.Abs(m.GapS.Estimate-2.1) > 1e-9 {
		t.Errorf("mqtts: %+v", m)
	}
	md, err := os.ReadFile(filepath.Join(out, FileMarkdown))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "Failover behind a three-node cluster (E11)") || !strings.Contains(string(md), "| E11 | wifi | 0 | 25.0 | quic | 3 | 300 | 294 | 0 |") {
		t.Errorf("markdown lacks the E11 table or its quic row:\n%s", md)
	}
	for _, f := range []string{"failover-recover.png", "failover-gap.svg"} {
		if _, err := os.Stat(filepath.Join(out, DirFigures, f)); err != nil {
			t.Errorf("figure: %v", err)
		}
	}
}
