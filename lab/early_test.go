package lab

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/report"
)

// TestReconnectEarlyOnLongLink runs pattern B over QUIC through real
// namespaces on a publisher link with an 800 ms round trip (clean
// subscriber link): the plain resumed start (CONNECT in 0-RTT, PUBLISH
// after CONNACK), and reconnect-early, whose first QoS 1 PUBLISH rides in
// the 0-RTT flight, under the broker's policies hold and accept. It counts
// round trips of the publisher's link in the records, never wall-clock
// speed beyond them:
//
//   - every resumed connection used 0-RTT; reconnect-early wrote its
//     PUBLISH before any answer could have come back (the first flight);
//   - the resumed message's receipt is a PUBACK: at least one round trip
//     after the send, and under hold at least two after the dial (the
//     broker waited for the client's Finished);
//   - the plain start and the held one deliver no sooner than 1.5 round
//     trips after the dial (physically required), while reconnect-early
//     under accept delivers within one round trip: the round trip saved;
//   - the report gives every cell a bound at or below its measurement and
//     a ratio; accept's median start-up latency is below the plain start's.
func TestReconnectEarlyOnLongLink(t *testing.T) {
	testutil.RequireNetAdmin(t, needIP)
	if testing.Short() {
		t.Skip("pattern B cells in namespaces (about a minute) skipped in -short mode")
	}
	bin := buildIOTQ(t)
	const rtt = 800 * time.Millisecond
	plain := Spec{
		Experiment:   "early",
		Topology:     TopologySpec{Kind: KindPubBrokerSub, Impaired: ImpairedPublisher},
		Profiles:     []string{"long"},
		ProfileDefs:  map[string]LinkSpec{"long": {Rate: 10_000_000, RTT: Duration(rtt)}},
		Losses:       []Percent{0},
		Transports:   []string{TransportQUIC},
		QoS:          []int{1},
		PayloadSizes: []int{32},
		Patterns:     []string{PatternReconnect},
		Messages:     1,
		Repetitions:  2,
	}
	early := plain
	early.Patterns = []string{PatternReconnectEarly}
	early.QUIC0RTT = []records.EarlyPolicy{records.EarlyHold, records.EarlyAccept}
	specs := []Spec{plain, early}
	r, err := NewProcRunner(ProcOptions{IOTQ: bin, Fabric: LinkFabric{Prefix: "iotqer-"}, NoPcap: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "early")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var prog strings.Builder
	res, err := Run(ctx, specs, Options{Dir: dir, Runner: r, Progress: &prog, Scenario: "early", Fabric: "link"})
	t.Logf("progress:\n%s", prog.String())
	if err != nil {
		t.Fatal(err)
	}
	rows, _, _ := records.ReadFile[records.CellRow](filepath.Join(dir, FileCells))
	if len(rows) != 3 || res.Failed != 0 {
		for _, r := range rows {
			t.Logf("%s: %s %s", r.Cell, r.Status, r.Error)
		}
		t.Fatalf("%d of 3 cells, %d failed", len(rows), res.Failed)
	}
	kind := map[string]string{} // cell -> plain, hold, accept
	for _, r := range rows {
		switch {
		case r.Pattern == PatternReconnect && r.QUIC0RTT == records.EarlyHold:
			kind[r.Cell] = "plain"
		case r.Pattern == PatternReconnectEarly && r.QUIC0RTT == records.EarlyHold:
			kind[r.Cell] = "hold"
		case r.Pattern == PatternReconnectEarly && r.QUIC0RTT == records.EarlyAccept:
			kind[r.Cell] = "accept"
		default:
			t.Fatalf("unexpected cell %s: pattern %s, quic_0rtt %q", r.Cell, r.Pattern, r.QUIC0RTT)
		}
	}
	// round trips of the publisher's link between two record times
	rounds := func(from, to int64) float64 { return float64(to-from) / float64(rtt) }
	const tol = 0.02 // the emulator's timers may fire a little early
	conns, _, _ := records.ReadFile[records.Connection](filepath.Join(dir, FileConnections))
	type key struct {
		cell string
		rep  int
	}
	resumed := map[key]records.Connection{}
	for _, c := range conns {
		if c.Role == records.RolePubResume {
			resumed[key{c.Cell, c.Rep}] = c
		}
	}
	msgs, _, _ := records.ReadFile[records.Message](filepath.Join(dir, FileMessages))
	checked := map[string]int{}
	for _, m := range msgs {
		if !strings.HasSuffix(m.Topic, "/2") { // the resumed connection's message
			continue
		}
		k := kind[m.Cell]
		c, ok := resumed[key{m.Cell, m.Rep}]
		if !ok {
			t.Fatalf("%s rep %d: no pub-resume connection", m.Cell, m.Rep)
		}
		if !c.Used0RTT || !c.Resumed {
			t.Errorf("%s rep %d: used_0rtt %v, resumed %v; want both", m.Cell, m.Rep, c.Used0RTT, c.Resumed)
		}
		if m.RecvNs == 0 || m.AcceptedNs == 0 {
			t.Errorf("%s rep %d: received at %d, acknowledged at %d", m.Cell, m.Rep, m.RecvNs, m.AcceptedNs)
			continue
		}
		startup := rounds(c.DialStartNs, m.RecvNs)
		ack := rounds(c.DialStartNs, m.AcceptedNs)
		t.Logf("%s (%s) rep %d: delivered after %.2f RTT, PUBACK after %.2f RTT", m.Cell, k, m.Rep, startup, ack)
		if rounds(m.SendNs, m.AcceptedNs) < 1-tol {
			t.Errorf("%s rep %d: receipt %.2f RTT after the send: no PUBACK can come back that soon", m.Cell, m.Rep, rounds(m.SendNs, m.AcceptedNs))
		}
		switch k {
		case "plain":
			if c.EarlySentNs != 0 {
				t.Errorf("%s: early_sent_ns %d in a plain reconnect", m.Cell, c.EarlySentNs)
			}
			if startup < 1.5-tol {
				t.Errorf("%s rep %d: plain resumed start delivered after %.2f RTT, below its 1.5", m.Cell, m.Rep, startup)
			}
		case "hold", "accept":
			if c.EarlySentNs == 0 || rounds(c.DialStartNs, c.EarlySentNs) >= 1 {
				t.Errorf("%s rep %d: early PUBLISH written %.2f RTT after the dial (early_sent_ns %d): not in the first flight",
					m.Cell, m.Rep, rounds(c.DialStartNs, c.EarlySentNs), c.EarlySentNs)
			}
			if k == "hold" && (startup < 1.5-tol || ack < 2-tol) {
				t.Errorf("%s rep %d: held early PUBLISH delivered after %.2f RTT, acknowledged after %.2f; the broker holds it until the handshake completed (1.5, 2)",
					m.Cell, m.Rep, startup, ack)
			}
			if k == "accept" && startup >= 1 {
				t.Errorf("%s rep %d: accepted early PUBLISH delivered after %.2f RTT; in the 0-RTT flight it arrives after half of one", m.Cell, m.Rep, startup)
			}
		}
		checked[k]++
	}
	for _, k := range []string{"plain", "hold", "accept"} {
		if checked[k] != 2 {
			t.Errorf("%s: %d resumed messages checked, want 2", k, checked[k])
		}
	}
	sum, err := report.Generate(ctx, report.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	med := map[string]float64{}
	for _, c := range sum.Cells {
		k := kind[c.Cell]
		if c.StartupMs.N != 2 || math.IsNaN(c.StartupRatio) || c.StartupMs.Min < c.StartupBoundMs*0.999 {
			t.Errorf("%s: %d start-up values, min %.1f ms, bound %.1f ms, ratio %v", c.Cell, c.StartupMs.N, c.StartupMs.Min, c.StartupBoundMs, c.StartupRatio)
		}
		want := map[string]float64{"plain": 1, "hold": 1, "accept": 0}[k]
		if c.StartupBoundRTTs != want {
			t.Errorf("%s (%s): bound holds %v round trips, want %v", c.Cell, k, c.StartupBoundRTTs, want)
		}
		med[k] = c.StartupMs.Median
	}
	if !(med["accept"] < med["plain"]) {
		t.Errorf("median start-up latency: accept %.1f ms, plain %.1f ms: the early PUBLISH saved nothing", med["accept"], med["plain"])
	}
}
