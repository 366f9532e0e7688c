package link

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/link/trace"
)

func mustTrace(t *testing.T, src string) *trace.Trace {
	t.Helper()
	tr, err := trace.Parse("test", strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestTraceServesAtOpportunities: a link driven by a trace delivers only
// at its opportunities, MTU bytes each; a packet larger than what is left
// of one continues at the next; an opportunity that finds nothing to send
// is lost; the trace repeats; the delay follows the delivery.
func TestTraceServesAtOpportunities(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	// opportunities at 1, 2, 4 ms, then 5, 6, 8 ms, then 9, 10, 12 ms ...
	d := NewDir(Params{Trace: mustTrace(t, "1\n2\n4\n"), Delay: 10 * time.Millisecond}, 0, 0, 1)
	for i, c := range []struct {
		at   float64
		size int
		want float64 // delivery, before the delay
	}{
		{0, 1000, 1},     // 500 B left at 1 ms
		{0, 1000, 2},     // 500 at 1 ms, 500 at 2 ms
		{0, 1000, 2},     // 1000 of the 1000 left at 2 ms
		{0, 100, 4},      // 2 ms is used up
		{4.5, 100, 5},    // the rest of 4 ms passed unused: next repeat
		{10.5, 1500, 12}, // 5, 6, 8, 9 and 10 ms found nothing: lost
		{10.5, 1500, 13}, // the third repeat's first
	} {
		evs := d.Arrive(ms(c.at), c.size, i)
		var got *Event
		for k := range evs {
			if evs[k].Ref == i {
				got = &evs[k]
			}
		}
		if got == nil || got.Drop != CauseNone {
			t.Fatalf("packet %d: %+v", i, evs)
		}
		if want := ms(c.want) + 10*time.Millisecond; got.Depart != want {
			t.Errorf("packet %d (%d B at %v ms): departs %v, want %v", i, c.size, c.at, got.Depart, want)
		}
	}
	if err := (Params{Trace: mustTrace(t, "1\n"), Rate: 1000}).Validate("l"); err == nil || !strings.Contains(err.Error(), "the trace sets the rate") {
		t.Errorf("rate beside a trace: %v", err)
	}
	if s := (Params{Trace: mustTrace(t, "10\n")}).String(); !strings.Contains(s, "trace test (mean 1.2mbit)") {
		t.Errorf("String: %s", s)
	}
}

// TestGEBursts: the model has the asked mean loss and mean burst length,
// in its formula and in the emulator's decisions.
func TestGEBursts(t *testing.T) {
	g, err := GEBursts(0.05, 4)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(g.MeanLoss()-0.05) > 1e-12 || g.R != 0.25 {
		t.Fatalf("%+v: mean %v", g, g.MeanLoss())
	}
	d := NewDir(Params{GilbertElliott: &g}, 0, 0, 7)
	lost, bursts, run := 0, 0, 0
	const total = 200000
	for i := range total {
		if evs := d.Arrive(time.Duration(i), 100, i); evs[len(evs)-1].Drop == CauseRandom {
			lost++
			run++
		} else if run > 0 {
			bursts, run = bursts+1, 0
		}
	}
	frac, mean := float64(lost)/total, float64(lost)/float64(bursts)
	if frac < 0.045 || frac > 0.055 || mean < 3.6 || mean > 4.4 {
		t.Errorf("lost %.4f in bursts of %.2f, want 0.05 in bursts of 4", frac, mean)
	}
	for _, c := range []struct{ mean, burst float64 }{{1, 4}, {0.05, 0.5}, {0.9, 1}} {
		if _, err := GEBursts(c.mean, c.burst); err == nil {
			t.Errorf("GEBursts(%v, %v) accepted", c.mean, c.burst)
		}
	}
}

// TestTopologyFileTakesTrace: a topology file's link may name a trace
// instead of a rate (for the whole link or one direction); a rate beside
// it, an unknown trace and a trace on a medium are errors that say so.
func TestTopologyFileTakesTrace(t *testing.T) {
	f, err := ParseTopology("t.yaml", []byte(`
links:
  - {name: up, a: pub, b: broker, profile: cellular, trace: cellular-lte, b_to_a: {trace: cellular-lte, delay: 5ms}}
  - {name: down, a: broker, b: sub, profile: wifi, a_to_b: {trace: cellular-lte}}
`))
	if err != nil {
		t.Fatal(err)
	}
	up, down := f.Topology.Links[0], f.Topology.Links[1]
	if up.AtoB.Trace == nil || up.AtoB.Rate != 0 || up.AtoB.Delay != 100*time.Millisecond || up.BtoA.Trace == nil || up.BtoA.Delay != 5*time.Millisecond {
		t.Errorf("up: %v / %v", up.AtoB, up.BtoA)
	}
	if down.AtoB.Trace == nil || down.BtoA.Trace != nil || down.BtoA.Rate != 20_000_000 {
		t.Errorf("down: %v / %v", down.AtoB, down.BtoA)
	}
	for _, c := range []struct{ src, want string }{
		{"links: [{name: l, a: x, b: y, rate: 1mbit, trace: cellular-lte}]", "t.yaml:1: links[0]: rate and trace cellular-lte: the trace sets the rate"},
		{"links: [{name: l, a: x, b: y, trace: nosuch}]", `trace "nosuch": neither a built-in trace`},
		{"links: [{name: l, a: x, b: y, a_to_b: {trace: /nonexistent/t.trace}}]", "t.yaml:1: links[0].a_to_b: trace: open /nonexistent/t.trace"},
		{"media: [{name: m, hub: h, stations: [a], capacity: 1mbit, trace: cellular-lte}]", "media[0]: trace cellular-lte: a medium has a capacity, not a trace"},
	} {
		if _, err := ParseTopology("t.yaml", []byte(c.src)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.src, err, c.want)
		}
	}
}
