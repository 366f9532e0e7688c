package lab

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/records"
)

// TestE10Metrics: lost is sent and never received, duplicates are receipts
// beyond a message's first, the gap is the longest pause between receipts
// whose later one came after the change, and the time to the first
// message sent after the change counts from the change.
func TestE10Metrics(t *testing.T) {
	const ms = int64(time.Millisecond)
	change := 1000 * ms
	var pubs []records.PubRecord
	for i := range int64(10) {
		pubs = append(pubs, records.PubRecord{Seq: i, SendNs: max(i*200*ms, 1), OK: i != 9}) // send_ns 0 would mean never sent
	}
	pubs = append(pubs, records.PubRecord{Seq: 10}) // never handed over: not sent
	// receipts 10 ms after sending, except: 5 (sent at 1000, the change)
	// to 8 (1600) arrive after the reconnection at 1900, 6 twice; 9 never
	var subs []records.SubRecord
	for i := range int64(9) {
		at := i*200*ms + 10*ms
		if i >= 5 {
			at = 1900*ms + i*ms
		}
		subs = append(subs, records.SubRecord{Seq: i, RecvNs: at})
	}
	subs = append(subs, records.SubRecord{Seq: 6, RecvNs: 1950 * ms})
	m := e10Metrics(pubs, subs, change)
	want := e10Measures{sent: 10, acked: 9, delivered: 9, lost: 1, duplicated: 1,
		// receipts: 10 210 410 610 810 1905 1906 1907 1908 1950: the pause
		// 810 -> 1905 ends after the change
		gap: 1095 * ms, gapBefore: 200 * ms,
		// message 6 (sent 1200) first arrived at 1906
		firstAfter: 906 * ms}
	if m != want {
		t.Errorf("metrics\n%+v, want\n%+v", m, want)
	}
}

// TestE10Spec: the built-in E10 expands into transport x change cells
// named by the change, the wifi-to-cellular cells carry the cellular link,
// and the path-change fields are refused where they cannot work.
func TestE10Spec(t *testing.T) {
	cells, err := Cells([]Spec{builtinSpec(t, "e10")})
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) != 8 {
		t.Fatalf("%d cells: %v", len(cells), ids(cells))
	}
	for _, c := range cells {
		if c.Pattern != PatternPathChange || c.ChangeAtNs != int64(30*time.Second) || c.Messages != 600 || !strings.Contains(c.ID, "_path-change_"+c.PathChange+"_") {
			t.Errorf("cell %s: %+v", c.ID, c)
		}
		if (c.PathChange == PathChangeWifiToCellular) != (c.ChangeLink != nil) {
			t.Errorf("cell %s: change link %+v", c.ID, c.ChangeLink)
		}
		if c.ChangeLink != nil && (c.ChangeLink.Name != "cellular" || c.ChangeLink.RTT() <= c.PubLink.RTT() || c.ChangeLink.LossPct != c.LossPct) {
			t.Errorf("cell %s: change link %+v from %+v", c.ID, *c.ChangeLink, c.PubLink)
		}
		if est := estimate(c); est < 10*time.Minute || est > 12*time.Minute {
			t.Errorf("cell %s: estimate %s for 10 repetitions of a 60 s stream", c.ID, est)
		}
	}
	cases := []struct{ src, want string }{
		{"experiment: x\npath_changes: [rebind]\n", "only for pattern path-change"},
		{"experiment: x\npatterns: [path-change]\nqos: [1]\npath_changes: [teleport]\n", "want rebind"},
		{"experiment: x\npatterns: [path-change]\nqos: [0]\n", "qos: [1]"},
		{"experiment: x\npatterns: [path-change]\nqos: [1]\nprofiles: [satellite]\npath_changes: [wifi-to-cellular]\n", "profiles: [wifi]"},
		{"experiment: x\npatterns: [path-change]\nqos: [1]\nmessages: 100\nintervals: [100ms]\nchange_at: 30s\n", "not inside the stream"},
		{"experiment: x\npatterns: [path-change]\nqos: [1]\ntransports: [amqps]\n", "MQTT's"},
	}
	for _, tc := range cases {
		if _, err := ParseSpecs("x.yaml", []byte(tc.src)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one saying %q", tc.src, err, tc.want)
		}
	}
	// the default change is half-way through the stream
	specs, err := ParseSpecs("x.yaml", []byte("experiment: x\npatterns: [path-change]\nqos: [1]\nmessages: 100\nintervals: [100ms]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cs, _ := Cells(specs); len(cs) != 2 || cs[0].ChangeAtNs != int64(5*time.Second) || cs[0].PathChange != PathChangeRebind {
		t.Errorf("default change: %+v", cs)
	}
}

// TestE10PathChangeEndToEnd runs short path-change cells through real
// namespaces and emulated links (the wifi profile, 5 s streams, the
// change at 2.5 s): MQTT over QUIC keeps its connection through the NAT's
// rebinding and the move to the cellular link (no reconnection, nothing
// lost), MQTT over TCP+TLS reconnects and loses nothing at QoS 1, and the
// NAT's drops are counted in links.csv and e10.csv alike.
func TestE10PathChangeEndToEnd(t *testing.T) {
	testutil.RequireNetAdmin(t, needIP)
	if testing.Short() {
		t.Skip("end-to-end E10 cells (about a minute) skipped in -short mode")
	}
	bin := buildIOTQ(t)
	s := builtinSpec(t, "e10")
	s.Losses, s.Messages, s.Repetitions, s.Scales = []Percent{0}, 50, 1, nil
	s.ChangeAt = Duration(2500 * time.Millisecond)
	r, err := NewProcRunner(ProcOptions{IOTQ: bin, Fabric: LinkFabric{Prefix: "iotqe10-"}, NoPcap: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "e10")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := Run(ctx, []Spec{s}, Options{Dir: dir, Runner: r, Scenario: "e10-test", Fabric: "link", Jobs: 1})
	if err != nil {
		t.Fatal(err)
	}
	cells, _, _ := records.ReadFile[records.CellRow](filepath.Join(dir, FileCells))
	if len(cells) != 4 || res.Failed != 0 {
		for _, c := range cells {
			t.Logf("%s: %s %s", c.Cell, c.Status, c.Error)
		}
		t.Fatalf("%d of 4 cells, %d failed", len(cells), res.Failed)
	}
	var natE10 int64
	for _, c := range cells {
		rows, _, err := records.ReadFile[records.E10Row](filepath.Join(dir, DirCells, c.Cell, "rep-1", records.FileE10))
		if err != nil || len(rows) != 1 {
			t.Fatalf("cell %s: %s: %d rows, %v", c.Cell, records.FileE10, len(rows), err)
		}
		e := rows[0]
		t.Logf("%s %s: %+v", e.Transport, e.PathChange, e)
		natE10 += e.DropNAT
		if e.Lost != 0 || e.Sent != 50 || e.Delivered != 50 {
			t.Errorf("%s %s: %d sent, %d delivered, %d lost", e.Transport, e.PathChange, e.Sent, e.Delivered, e.Lost)
		}
		switch e.Transport {
		case TransportQUIC:
			if e.Reconnects != 0 {
				t.Errorf("quic %s: %d reconnections: the connection did not survive the change", e.PathChange, e.Reconnects)
			}
		case TransportTLS:
			if e.Reconnects < 1 || e.ReconnectNs <= 0 {
				t.Errorf("mqtts %s: %d reconnections (%d ns): TCP cannot survive a new port", e.PathChange, e.Reconnects, e.ReconnectNs)
			}
		}
		if e.ChangeNs == 0 || e.FirstAfterNs <= 0 || e.GapNs <= 0 {
			t.Errorf("%s %s: change %d, first after %d, gap %d", e.Transport, e.PathChange, e.ChangeNs, e.FirstAfterNs, e.GapNs)
		}
	}
	links, _, err := records.ReadFile[records.LinkCount](filepath.Join(dir, FileLinks))
	if err != nil {
		t.Fatal(err)
	}
	var natLinks int64
	for _, l := range links {
		if l.Link == "pub" {
			natLinks += l.DropNAT
		}
	}
	// links.csv counts the whole repetition, e10.csv from the publisher's
	// start to the subscriber's end: nearly the same span
	if natE10 == 0 || natLinks < natE10 {
		t.Errorf("nat drops: links.csv %d, e10.csv %d; want some, links.csv at least e10.csv's", natLinks, natE10)
	}
}
