package lab

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/internal/artemis"
	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/report"
)

// TestE8SmokeEndToEnd runs E8 at its smallest through real namespaces and
// emulated links: ActiveMQ Artemis in the broker's namespace (amqps) and
// iotq gateway in front of it (amqp+quic), a fresh and a resumed batch per
// transport, and a fresh batch echoed back by the receiver. Every message
// arrives, the echo round trip covers the path twice, the communication
// time and the
// start-up latency lie above their physical bounds, the resumed QUIC
// connection used 0-RTT and the TLS one resumed, no Artemis outlives its
// cell, and the report shows the batch table.
func TestE8SmokeEndToEnd(t *testing.T) {
	testutil.RequireNetAdmin(t, needIP)
	if testing.Short() {
		t.Skip("end-to-end E8 cells (about a minute) skipped in -short mode")
	}
	if _, err := artemis.Command(artemis.Options{}); err != nil {
		testutil.SkipOrFail(t, "E8 needs ActiveMQ Artemis: %v", err)
	}
	bin := buildIOTQ(t)
	specs, _ := Builtin("e8")
	s, err := specs[0].Scaled(ScaleSmoke)
	if err != nil {
		t.Fatal(err)
	}
	// one profile and one lossy point keep it short; the physics stay
	s.Profiles, s.Losses, s.Messages, s.Repetitions = []string{"wifi"}, []Percent{5}, 20, 2
	r, err := NewProcRunner(ProcOptions{IOTQ: bin, Fabric: LinkFabric{Prefix: "iotqe8-"}, NoPcap: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "e8")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var prog strings.Builder
	res, err := Run(ctx, []Spec{s}, Options{Dir: dir, Runner: r, Progress: &prog, Scenario: "e8", Scale: ScaleSmoke, Fabric: "link", Jobs: 2})
	t.Logf("progress:\n%s", prog.String())
	if err != nil {
		t.Fatal(err)
	}
	rows, _, _ := records.ReadFile[records.CellRow](filepath.Join(dir, FileCells))
	if len(rows) != 6 || res.Failed != 0 {
		for _, r := range rows {
			t.Logf("%s: %s %s", r.Cell, r.Status, r.Error)
			if r.Status != StatusOK {
				for _, f := range []string{"artemis.stderr", "gateway.stderr"} {
					t.Logf("%s: %s", f, tailFile(filepath.Join(dir, DirCells, r.Cell, f), 2000))
				}
			}
		}
		t.Fatalf("%d of 6 cells, %d failed", len(rows), res.Failed)
	}
	path := map[string]time.Duration{}
	for _, r := range rows {
		if r.Protocol != records.ProtocolAMQP {
			t.Errorf("cell %s: protocol %q", r.Cell, r.Protocol)
		}
		path[r.Cell] = time.Duration(r.PathDelayNs)
	}
	msgs, _, _ := records.ReadFile[records.Message](filepath.Join(dir, FileMessages))
	if len(msgs) != 6*20*2 {
		t.Errorf("messages.csv has %d rows, want 240", len(msgs))
	}
	echoes := 0
	for _, m := range msgs {
		if m.RecvNs == 0 || m.Protocol != records.ProtocolAMQP {
			t.Errorf("%s rep %d seq %d: not delivered or protocol %q", m.Cell, m.Rep, m.Seq, m.Protocol)
			continue
		}
		if d := time.Duration(m.DelayNs); d < path[m.Cell] {
			t.Errorf("%s seq %d: delay %v below the path delay %v", m.Cell, m.Seq, d, path[m.Cell])
		}
		// the acknowledgement needs the round trip to the broker at least
		if rtt := time.Duration(m.AckRTT()); rtt < 25*time.Millisecond {
			t.Errorf("%s seq %d: ack round trip %v below the link's 25 ms", m.Cell, m.Seq, rtt)
		}
		if strings.Contains(m.Cell, PatternBatchEcho) {
			// there and back: both links twice
			if rtt := time.Duration(m.EchoRTT()); rtt < 2*path[m.Cell] {
				t.Errorf("%s seq %d: echo round trip %v below twice the path delay %v", m.Cell, m.Seq, rtt, path[m.Cell])
			}
			echoes++
		} else if m.EchoNs != 0 {
			t.Errorf("%s seq %d: an echo without batch-echo", m.Cell, m.Seq)
		}
	}
	if echoes != 2*20*2 {
		t.Errorf("%d messages of batch-echo cells, want 80", echoes)
	}
	comps, _, _ := records.ReadFile[records.Completion](filepath.Join(dir, FileCompletions))
	if len(comps) != 12 {
		t.Errorf("completions.csv has %d rows, want 12", len(comps))
	}
	for _, c := range comps {
		// a connection (2 round trips on TCP+TLS, 1 on QUIC, 0 with 0-RTT)
		// and AMQP's open, begin and attach before the batch: far above
		// the one-way path; at least that
		if c.CompletionNs < int64(path[c.Cell]) {
			t.Errorf("%s rep %d: communication time %v", c.Cell, c.Rep, time.Duration(c.CompletionNs))
		}
	}
	conns, _, _ := records.ReadFile[records.Connection](filepath.Join(dir, FileConnections))
	resumed, zero := 0, 0
	for _, c := range conns {
		if c.Role != records.RolePub || !strings.Contains(c.Cell, PatternBatchResume) {
			continue
		}
		if c.Resumed {
			resumed++
		}
		if c.Used0RTT {
			zero++
		}
	}
	if resumed < 3 || zero < 1 {
		t.Errorf("batch-resume: %d of 4 connections resumed, %d used 0-RTT (want both QUIC ones)", resumed, zero)
	}
	// nothing left: no Artemis (its command line names the cell directory)
	if out, _ := exec.Command("pgrep", "-f", dir).Output(); len(out) > 0 {
		t.Errorf("processes of the run still alive: %s", out)
	}
	sum, err := report.Generate(ctx, report.Options{Dir: dir, NoFigures: true})
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	if len(sum.Batch) != 6 {
		t.Fatalf("report batch rows: %d", len(sum.Batch))
	}
	for _, b := range sum.Batch {
		if (b.Pattern == PatternBatchEcho) != (b.EchoRTTMs.N == 40) {
			t.Errorf("report %s: %d echo round trips", b.Cell, b.EchoRTTMs.N)
		}
		if b.CommS.N != 2 || b.StartupMs.N != 2 || !(b.StartupMs.Min >= b.StartupBoundMs) || b.DeliveryRatio != 1 {
			t.Errorf("report %s: comm n %d, startup n %d min %.1f bound %.1f, delivery %v", b.Cell, b.CommS.N, b.StartupMs.N, b.StartupMs.Min, b.StartupBoundMs, b.DeliveryRatio)
		}
	}
}
