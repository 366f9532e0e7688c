package lab

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/records"
)

// TestBuiltinBurstyAndTrace: e1-bursty is E1 with Gilbert-Elliott loss of
// E1's mean rates in bursts of 4 packets (one cell without loss per
// profile and transport); e1-trace is E1 on a link driven by the shipped
// cellular-lte trace with 100 ms one-way delay. The emulator gets exactly
// that.
func TestBuiltinBurstyAndTrace(t *testing.T) {
	specs, _ := Builtin("e1-bursty")
	cells, err := Cells(specs)
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) != 3*6*2 {
		t.Fatalf("e1-bursty: %d cells, want 36", len(cells))
	}
	for _, c := range cells {
		p, err := toParams(c.PubLink)
		if err != nil {
			t.Fatal(err)
		}
		if c.LossPct == 0 {
			if c.PubLink.BurstLen != 0 || p.GilbertElliott != nil || strings.Contains(c.ID, "_burst") {
				t.Fatalf("%s: bursts without loss: %+v", c.ID, c.PubLink)
			}
			continue
		}
		g := p.GilbertElliott
		if c.PubLink.BurstLen != 4 || g == nil || g.R != 0.25 || math.Abs(g.MeanLoss()-c.LossPct/100) > 1e-12 || !strings.Contains(c.ID, "_burst4_") || c.PubLink.Direction != DirectionEgress {
			t.Fatalf("%s: %+v, emulator %+v", c.ID, c.PubLink, g)
		}
	}
	specs, _ = Builtin("e1-trace")
	cells, err = Cells(specs)
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) != 6*2 {
		t.Fatalf("e1-trace: %d cells", len(cells))
	}
	for _, c := range cells {
		p, err := toParams(c.PubLink)
		if err != nil {
			t.Fatal(err)
		}
		if p.Trace == nil || p.Trace.Name != "cellular-lte" || p.Rate != 0 || p.Delay != 100*time.Millisecond || c.PubLink.Trace != "cellular-lte" {
			t.Fatalf("%s: %+v -> %v", c.ID, c.PubLink, p)
		}
	}
}

func TestBurstsAndTracesValidated(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.trace")
	if err := os.WriteFile(bad, []byte("1\n2\nx\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ src, want string }{
		{"experiment: x\nlosses: [5]\nloss_bursts: [0.5]\n", "loss_bursts[0]: 0.5: want a mean burst length of at least 1"},
		{"experiment: x\nlosses: [5]\nloss_bursts: [4, 4]\n", "loss_bursts[1]: 4 listed twice"},
		{"experiment: x\ntopology: {kind: shared-medium}\nlosses: [5]\nloss_bursts: [4]\n", "a shared medium has a frame error rate"},
		{"experiment: x\nprofiles: [t]\nprofile_defs: {t: {trace: nosuch}}\n", "profile_defs.t.trace: trace \"nosuch\": neither a built-in trace (cellular-lte) nor a file"},
		{"experiment: x\nprofiles: [t]\nprofile_defs: {t: {trace: cellular-lte, rate: 10mbit}}\n", "profile_defs.t.rate: the trace cellular-lte sets the rate"},
		{"experiment: x\nprofiles: [t]\nprofile_defs: {t: {trace: " + bad + "}}\n", bad + ":3: \"x\" is not a time in whole milliseconds"},
	} {
		if _, err := ParseSpecs("s.yaml", []byte(c.src)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.src, err, c.want)
		}
	}
}

// TestBurstyAndTraceCellsRun runs one smallest cell of e1-bursty and one
// of e1-trace through namespaces with the real broker and clients: both
// complete, the records say which loss model and trace they ran with, and
// no message of the trace-driven link arrives before its 100 ms delay.
func TestBurstyAndTraceCellsRun(t *testing.T) {
	testutil.RequireNetAdmin(t, needIP)
	if testing.Short() {
		t.Skip("end-to-end cells skipped in -short mode")
	}
	bin := buildIOTQ(t)
	var specs []Spec
	for _, name := range []string{"e1-bursty", "e1-trace"} {
		s, _ := Builtin(name)
		sp := s[0]
		if name == "e1-bursty" {
			sp.Profiles = []string{"wifi"}
		}
		sp.Losses, sp.Transports, sp.Messages = []Percent{5}, []string{TransportQUIC}, 4
		specs = append(specs, sp)
	}
	r, err := NewProcRunner(ProcOptions{IOTQ: bin, Fabric: LinkFabric{Prefix: "iotqbt-"}, NoPcap: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "bt")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var prog strings.Builder
	res, err := Run(ctx, specs, Options{Dir: dir, Runner: r, Progress: &prog, Scenario: "bt", Scale: ScaleFull, Fabric: "link", Jobs: 2})
	t.Logf("progress:\n%s", prog.String())
	if err != nil {
		t.Fatal(err)
	}
	rows, _, _ := records.ReadFile[records.CellRow](filepath.Join(dir, FileCells))
	if len(rows) != 2 || res.Failed != 0 {
		t.Fatalf("%d of 2 cells, %d failed: %+v", len(rows), res.Failed, rows)
	}
	for _, row := range rows {
		d, ok, err := readDone(filepath.Join(dir, "cells", row.Cell))
		if !ok || err != nil {
			t.Fatalf("%s: done.json %v", row.Cell, err)
		}
		switch d.Cell.Experiment {
		case "E1-bursty":
			if d.Cell.PubLink.BurstLen != 4 {
				t.Errorf("%s: recorded %+v", row.Cell, d.Cell.PubLink)
			}
		case "E1-trace":
			if d.Cell.PubLink.Trace != "cellular-lte" {
				t.Errorf("%s: recorded %+v", row.Cell, d.Cell.PubLink)
			}
		}
	}
	msgs, _, _ := records.ReadFile[records.Message](filepath.Join(dir, FileMessages))
	for _, m := range msgs {
		if m.RecvNs != 0 && strings.HasPrefix(m.Cell, "E1-trace") && time.Duration(m.DelayNs) < 100*time.Millisecond {
			t.Errorf("%s seq %d: delay %v below the link's 100 ms", m.Cell, m.Seq, time.Duration(m.DelayNs))
		}
	}
}
