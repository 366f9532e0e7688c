package report

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestQUICStreamStrategyLabels: a run whose MQTT over QUIC cells swept the
// clients' stream strategy (cells.csv quic_streams, records version 5)
// names the strategy in the cell tables and pairs the per-topic cell with
// the same TCP cell as a configuration of its own; the default (control)
// is named nowhere, so reports of runs that did not sweep it read as
// before.
func TestQUICStreamStrategyLabels(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "results")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFixture(t, dir)
	const src = "E1_wifi_loss0_periodic_qos0_100B_every1s_quic"
	const topic = src + "_per-topic"
	// cells.csv gains the version 5 column; the per-topic cell copies the
	// control cell's rows under its own id
	editCSV(t, filepath.Join(dir, "cells.csv"), func(head []string, rows [][]string) ([]string, [][]string) {
		tr := slices.Index(head, "transport")
		head = append(head, "quic_streams")
		var out [][]string
		for _, r := range rows {
			streams := ""
			if r[tr] == "quic" {
				streams = "control"
			}
			out = append(out, append(r, streams))
			if r[0] == src {
				cp := slices.Clone(r)
				cp[0] = topic
				out = append(out, append(cp, "per-topic"))
			}
		}
		return head, out
	})
	for _, f := range []string{"messages.csv", "connections.csv", "links.csv", "cpu.csv"} {
		editCSV(t, filepath.Join(dir, f), func(head []string, rows [][]string) ([]string, [][]string) {
			var out [][]string
			for _, r := range rows {
				out = append(out, r)
				if r[0] == src {
					cp := slices.Clone(r)
					cp[0] = topic
					out = append(out, cp)
				}
			}
			return head, out
		})
	}
	s, out := generate(t, dir, Options{NoFigures: true})
	var found bool
	for _, c := range s.Cells {
		switch c.Cell {
		case topic:
			found = true
			if c.QUICStreams != "per-topic" || c.transportName() != "quic (per-topic)" {
				t.Errorf("per-topic cell: quic_streams %q, transport %q", c.QUICStreams, c.transportName())
			}
		case src:
			if c.QUICStreams != "control" || c.transportName() != "quic" {
				t.Errorf("control cell: quic_streams %q, transport %q", c.QUICStreams, c.transportName())
			}
		}
	}
	if !found {
		t.Fatalf("no cell %s in the summary", topic)
	}
	md, err := os.ReadFile(filepath.Join(out, FileMarkdown))
	if err != nil {
		t.Fatal(err)
	}
	var delayRow, pairRow bool
	for _, line := range strings.Split(string(md), "\n") {
		if strings.Contains(line, "(control)") {
			t.Errorf("report names the default strategy: %s", line)
		}
		if strings.Contains(line, "| "+topic+" |") && strings.Contains(line, "| quic (per-topic) |") {
			delayRow = true
		}
		// the comparison: the TCP cell beside the per-topic QUIC cell
		if strings.HasPrefix(line, "| E1 | wifi | 0 | 0 | periodic |") && strings.Contains(line, "| mqtts | quic (per-topic) |") {
			pairRow = true
		}
	}
	if !delayRow || !pairRow {
		t.Errorf("report.md: per-topic cell row %v, comparison row with mqtts %v", delayRow, pairRow)
	}
	var row bool
	for _, e := range s.Experiments {
		row = row || (e.Experiment == "E1" && e.Start == "QUIC streams per-topic" && e.QUIC.Cells == 1 && e.TCP.Cells > 0)
	}
	if !row {
		t.Errorf("no per-experiment row for E1's per-topic cells beside its TCP cells: %+v", s.Experiments)
	}
}

// editCSV rewrites a CSV file through edit.
func editCSV(t *testing.T, path string, edit func(head []string, rows [][]string) ([]string, [][]string)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	all, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil || len(all) == 0 {
		t.Fatalf("%s: %v", path, err)
	}
	head, rows := edit(all[0], all[1:])
	w, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	cw := csv.NewWriter(w)
	if err := cw.WriteAll(append([][]string{head}, rows...)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
