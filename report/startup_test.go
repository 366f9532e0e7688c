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

// TestStartupBoundMQTT pins the round trips of a resumed MQTT start per
// transport, pattern and broker 0-RTT policy (experiments.md, "Start-up
// latency and its bound") and the bound they give on a link.
func TestStartupBoundMQTT(t *testing.T) {
	const ms = 1e6
	both := Link{PubDelayNs: 300 * ms, SubDelayNs: 0, Source: "test"}                          // RTT 600 ms
	egress := Link{PubDelayNs: 300 * ms, PubDirection: records.DirectionEgress}                // RTT 300 ms
	rated := Link{PubDelayNs: 300 * ms, PubRateBps: 1e6, SubDelayNs: 10 * ms, SubRateBps: 1e6} // 32 B: 0.256 ms per link
	for _, c := range []struct {
		transport, pattern string
		policy             records.EarlyPolicy
		zeroRTT            bool
		rtts               float64
		link               Link
		boundMs            float64
	}{
		{"mqtts", records.PatternReconnect, "", false, 3, both, 3*600 + 300},
		{"mqtts", records.PatternReconnectEarly, "", false, 2, both, 2*600 + 300},
		{"quic", records.PatternReconnect, records.EarlyHold, true, 1, both, 600 + 300},
		{"quic", records.PatternReconnect, records.EarlyAccept, true, 1, both, 600 + 300},
		{"quic", records.PatternReconnect, records.EarlyRefuse, false, 2, both, 2*600 + 300},
		{"quic", records.PatternReconnectEarly, records.EarlyAccept, true, 0, both, 300},
		{"quic", records.PatternReconnectEarly, records.EarlyHold, true, 1, both, 600 + 300},
		{"quic", records.PatternReconnectEarly, "", true, 1, both, 600 + 300}, // before version 3: the broker held
		{"quic", records.PatternReconnectEarly, records.EarlyRefuse, false, 1, both, 600 + 300},
		{"quic", records.PatternReconnectEarly, records.EarlyAccept, true, 0, egress, 300},
		{"mqtts", records.PatternReconnect, "", false, 3, egress, 3*300 + 300},
		{"quic", records.PatternReconnectEarly, records.EarlyAccept, true, 0, rated, 300 + 10 + 2*0.256},
		{"mqtts", records.PatternReconnectEarly, "", false, 2, rated, 2*600 + 300 + 10 + 2*0.256},
	} {
		rtts := startupRTTsMQTT(c.transport, c.pattern, string(c.policy), c.zeroRTT)
		got := startupBoundMQTT(c.link, 32, rtts)
		if rtts != c.rtts || math.Abs(got-c.boundMs) > 1e-9 {
			t.Errorf("%s %s %q 0-RTT %v on %+v: %v RTTs, bound %v ms; want %v, %v", c.transport, c.pattern, c.policy, c.zeroRTT,
				c.link, rtts, got, c.rtts, c.boundMs)
		}
	}
	if r := ratio(450, 300); r != 1.5 {
		t.Errorf("ratio(450, 300) = %v", r)
	}
	for _, r := range []float64{ratio(nan(), 300), ratio(450, 0), ratio(0, 300)} {
		if !math.IsNaN(r) {
			t.Errorf("ratio without a value or a bound: %v, want NaN", r)
		}
	}
}

// TestStartupRatioInReport: a results directory with one repetition per
// pattern B cell (TCP+TLS, QUIC reconnect, QUIC reconnect-early under
// accept and hold) gives each cell its bound from the link columns and the
// ratio measured / bound in summary.json, tables.csv and the start-up
// table, and the accept cell a comparison row of its own.
func TestStartupRatioInReport(t *testing.T) {
	dir := t.TempDir()
	const ms = int64(1e6)
	type cell struct {
		id, transport, pattern string
		policy                 records.EarlyPolicy
		zeroRTT                bool
		latMs                  int64
		wantRTTs, wantBound    float64
	}
	// link: 300 ms each way on the publisher's link (RTT 600 ms), clean
	// unlimited subscriber link; payload 32 B, no rate: no serialization
	cells := []cell{
		{"E5_x_reconnect_mqtts", "mqtts", records.PatternReconnect, "", false, 2200, 3, 2100},
		{"E5_x_reconnect_quic", "quic", records.PatternReconnect, records.EarlyHold, true, 990, 1, 900},
		{"E5_x_reconnect-early_mqtts", "mqtts", records.PatternReconnectEarly, "", false, 1650, 2, 1500},
		{"E5_x_reconnect-early_quic", "quic", records.PatternReconnectEarly, records.EarlyHold, true, 1000, 1, 900},
		{"E5_x_reconnect-early_quic_0rtt-accept", "quic", records.PatternReconnectEarly, records.EarlyAccept, true, 330, 0, 300},
	}
	cw, err := records.Create[records.CellRow](filepath.Join(dir, records.FileCells))
	if err != nil {
		t.Fatal(err)
	}
	mw, _ := records.Create[records.Message](filepath.Join(dir, records.FileMessages))
	connw, _ := records.Create[records.Connection](filepath.Join(dir, records.FileConnections))
	base := int64(1_700_000_000) * 1e9
	for i, c := range cells {
		if err := cw.Write(records.CellRow{Cell: c.id, Experiment: "E5", Profile: "x", Transport: c.transport, Protocol: records.ProtocolMQTT,
			QUIC0RTT: c.policy, QoS: 1, Pattern: c.pattern, Size: 32, Messages: 1, Repetitions: 1, Topology: records.KindPubBrokerSub,
			DelayConvention: records.DelayOneWay, PubLink: "x", PubDelayNs: 300 * ms, SubLink: "ethernet", Status: records.StatusOK}); err != nil {
			t.Fatal(err)
		}
		t0 := base + int64(i)*10_000*ms
		dial2 := t0 + 5000*ms
		mw.Write(records.Message{Cell: c.id, Rep: 1, Protocol: "mqtt", Transport: c.transport, QoS: 1, Seq: 0, Size: 32, SendNs: t0,
			RecvNs: t0 + 400*ms, DelayNs: 400 * ms, Node: "pub", Topic: "lab/1/1"})
		mw.Write(records.Message{Cell: c.id, Rep: 1, Protocol: "mqtt", Transport: c.transport, QoS: 1, Seq: 1, Size: 32, SendNs: dial2,
			RecvNs: dial2 + c.latMs*ms, DelayNs: c.latMs * ms, Node: "pub", Topic: "lab/1/2", AcceptedNs: dial2 + (c.latMs+300)*ms})
		connw.Write(records.Connection{Cell: c.id, Rep: 1, Role: records.RolePub, Node: "pub", Transport: c.transport, DialStartNs: t0 - 2000*ms})
		connw.Write(records.Connection{Cell: c.id, Rep: 1, Role: records.RolePubResume, Node: "pub", Transport: c.transport, DialStartNs: dial2,
			Resumed: true, Used0RTT: c.zeroRTT})
	}
	for _, w := range []interface{ Close() error }{cw, mw, connw} {
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := Generate(context.Background(), Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]*CellResult{}
	for _, c := range sum.Cells {
		byID[c.Cell] = c
	}
	for _, c := range cells {
		got := byID[c.id]
		if got == nil {
			t.Fatalf("no cell %s in the summary", c.id)
		}
		want := float64(c.latMs) / c.wantBound
		if got.StartupBoundRTTs != c.wantRTTs || math.Abs(got.StartupBoundMs-c.wantBound) > 1e-6 || math.Abs(got.StartupRatio-want) > 1e-9 || got.QUIC0RTT != string(c.policy) {
			t.Errorf("%s: %v RTTs, bound %v ms, ratio %v, policy %q; want %v, %v, %v, %q", c.id, got.StartupBoundRTTs, got.StartupBoundMs,
				got.StartupRatio, got.QUIC0RTT, c.wantRTTs, c.wantBound, want, c.policy)
		}
	}
	glance := map[string]*ExperimentSummary{}
	for _, e := range sum.Experiments {
		glance[e.Start] = e
	}
	if e := glance["reconnect-early, broker 0-RTT accept"]; e == nil || e.QUIC.Cells != 1 || math.Abs(e.QUIC.StartupRatio-1.1) > 1e-9 ||
		e.TCP.Cells != 1 || math.Abs(e.TCP.StartupRatio-1.1) > 1e-9 {
		t.Errorf("per-experiment row of the accept start: %+v", e)
	}
	if e := glance[""]; e == nil || e.TCP.Cells != 1 || e.QUIC.Cells != 1 || math.Abs(e.QUIC.StartupRatio-1.1) > 1e-9 || math.Abs(e.TCP.StartupMs-2200) > 1e-9 {
		t.Errorf("per-experiment main row: %+v", e)
	}
	js, _ := os.ReadFile(filepath.Join(dir, "report", "summary.json"))
	csv, _ := os.ReadFile(filepath.Join(dir, "report", "tables.csv"))
	md, _ := os.ReadFile(filepath.Join(dir, "report", "report.md"))
	for name, want := range map[string][]string{
		"summary.json": {`"startup_ratio": 1.1`, `"startup_bound_rtts": 0`, `"quic_0rtt": "accept"`, `"start": "reconnect-early, broker 0-RTT accept"`},
		"tables.csv":   {"startup_ratio", ",300.000000,0.000000,1.100000,1,1,accept,"},
		"report.md": {"| E5_x_reconnect-early_quic_0rtt-accept | x | 0 | quic | reconnect-early | accept | 1 | 1 | 1 | 330.000 | 330.000 |", "| 300.000 | 0 | 1.10 |", "broker 0-RTT accept | mqtts | quic |",
			// per experiment: the accept start beside the TCP cell of reconnect-early
			"| E5 | mqtt | reconnect-early, broker 0-RTT accept | mqtts | quic | 1 | 1 |",
			"| E5 | mqtt | reconnect-early | mqtts | quic | 1 | 1 |"},
	} {
		text := map[string][]byte{"summary.json": js, "tables.csv": csv, "report.md": md}[name]
		for _, w := range want {
			if !strings.Contains(string(text), w) {
				t.Errorf("%s lacks %q", name, w)
			}
		}
	}
}
