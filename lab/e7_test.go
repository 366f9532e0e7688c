package lab

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/report"
)

// TestE7SmokeEndToEnd runs E7 at its smallest through real namespaces:
// one lossy point, MQTT over TCP, CoAP over UDP, MQTT over QUIC and CoAP
// over QUIC, closed loop. The broker listens on the cell's transport and
// on MQTT for the subscriber; every cell completes, each message is either
// delivered no earlier than the path delay or (CoAP) recorded as lost,
// the publisher's link carried bytes both ways, and the report has the
// protocol table.
func TestE7SmokeEndToEnd(t *testing.T) {
	testutil.RequireNetAdmin(t, needIP)
	if testing.Short() {
		t.Skip("end-to-end E7 cells skipped in -short mode")
	}
	bin := buildIOTQ(t)
	specs, _ := Builtin("e7")
	s, err := specs[0].Scaled(ScaleSmoke)
	if err != nil {
		t.Fatal(err)
	}
	s.Losses, s.Messages = []Percent{5}, 15
	r, err := NewProcRunner(ProcOptions{IOTQ: bin, Fabric: LinkFabric{Prefix: "iotqe7-"}, NoPcap: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "e7")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var prog strings.Builder
	res, err := Run(ctx, []Spec{s}, Options{Dir: dir, Runner: r, Progress: &prog, Scenario: "e7", Scale: ScaleSmoke, Fabric: "link", Jobs: 2})
	t.Logf("progress:\n%s", prog.String())
	if err != nil {
		t.Fatal(err)
	}
	rows, _, _ := records.ReadFile[records.CellRow](filepath.Join(dir, FileCells))
	if len(rows) != 4 || res.Failed != 0 {
		for _, r := range rows {
			t.Logf("%s: %s %s", r.Cell, r.Status, r.Error)
		}
		t.Fatalf("%d of 4 cells, %d failed", len(rows), res.Failed)
	}
	path := map[string]time.Duration{}
	for _, r := range rows {
		if want := ProtocolOf(r.Transport); r.Protocol != want {
			t.Errorf("cell %s: protocol %q, want %q", r.Cell, r.Protocol, want)
		}
		path[r.Cell] = time.Duration(r.PathDelayNs)
	}
	msgs, _, _ := records.ReadFile[records.Message](filepath.Join(dir, FileMessages))
	per := map[string]int{}
	for _, m := range msgs {
		per[m.Cell]++
		switch {
		case m.RecvNs == 0 && m.Protocol != records.ProtocolCoAP:
			t.Errorf("%s seq %d: lost over %s, which retransmits until acknowledged", m.Cell, m.Seq, m.Transport)
		case m.RecvNs != 0 && time.Duration(m.DelayNs) < path[m.Cell]:
			t.Errorf("%s seq %d: delay %v below the path delay %v", m.Cell, m.Seq, time.Duration(m.DelayNs), path[m.Cell])
		}
	}
	for _, r := range rows {
		if per[r.Cell] != 15 {
			t.Errorf("cell %s: %d messages recorded, want 15 (lost ones included)", r.Cell, per[r.Cell])
		}
	}
	links, _, _ := records.ReadFile[records.LinkCount](filepath.Join(dir, FileLinks))
	bytes := map[string]int64{}
	for _, l := range links {
		if l.Link == records.LinkPub {
			bytes[l.Cell+"|"+records.LinkFrom(l.Direction)] += l.Bytes
		}
	}
	for _, r := range rows {
		if bytes[r.Cell+"|"+NodePub] == 0 || bytes[r.Cell+"|"+NodeBroker] == 0 {
			t.Errorf("cell %s: publisher link bytes %v", r.Cell, bytes)
		}
	}
	if _, err := report.Generate(ctx, report.Options{Dir: dir, NoFigures: true}); err != nil {
		t.Fatalf("report: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "report", "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	if !strings.Contains(md, "Protocols on the lossy link") || strings.Count(md, "| E7 | lan | 5 | 60 |") != 4 {
		t.Errorf("report lacks the protocol table with 4 rows:\n%s", md)
	}
}
