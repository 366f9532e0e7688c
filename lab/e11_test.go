package lab

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/report"
)

// TestE11SmokeEndToEnd runs e11-smoke through real namespaces and emulated
// links: per transport a fresh three-node NATS cluster in the broker's
// namespace (and two iotq gateway instances sharing ticket keys in front of
// it for QUIC), a 15 s QoS 1 stream
// from the publisher behind the wifi link, the publisher's node killed
// half-way. Asserted: both cells complete, the node that died is the one
// the publisher was on, no acknowledged message is lost, the publisher
// publishes again after the kill (a recovery time, a delivery gap) through
// a second connection (QUIC: with 0-RTT on the other gateway instance),
// and the report shows the failover table and figures.
func TestE11SmokeEndToEnd(t *testing.T) {
	testutil.RequireNetAdmin(t, needIP)
	if testing.Short() {
		t.Skip("end-to-end E11 cells (about a minute) skipped in -short mode")
	}
	if _, _, err := natsServer(); err != nil {
		testutil.SkipOrFail(t, "%v", err)
	}
	bin := buildIOTQ(t)
	specs, ok := Builtin("e11-smoke")
	if !ok {
		t.Fatal("no built-in e11-smoke")
	}
	r, err := NewProcRunner(ProcOptions{IOTQ: bin, Fabric: LinkFabric{Prefix: "iotqe11-"}, NoPcap: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "e11")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var prog strings.Builder
	res, err := Run(ctx, specs, Options{Dir: dir, Runner: r, Progress: &prog, Scenario: "e11-smoke", Fabric: "link", Jobs: 1})
	t.Logf("progress:\n%s", prog.String())
	if err != nil {
		t.Fatal(err)
	}
	cells, _, _ := records.ReadFile[records.CellRow](filepath.Join(dir, FileCells))
	if len(cells) != 2 || res.Failed != 0 {
		for _, c := range cells {
			t.Logf("%s: %s %s", c.Cell, c.Status, c.Error)
		}
		t.Fatalf("%d of 2 cells, %d failed", len(cells), res.Failed)
	}
	seen := map[string]bool{}
	for _, c := range cells {
		rows, _, err := records.ReadFile[records.E11Row](filepath.Join(dir, DirCells, c.Cell, "rep-1", records.FileE11))
		if err != nil || len(rows) != 1 {
			t.Fatalf("cell %s: %s: %d rows, %v", c.Cell, records.FileE11, len(rows), err)
		}
		e := rows[0]
		t.Logf("%s: %+v", e.Transport, e)
		seen[e.Transport] = true
		if e.Lost != 0 {
			t.Errorf("%s: %d acknowledged messages lost", e.Transport, e.Lost)
		}
		if e.KillTarget != "publisher" {
			t.Errorf("%s: killed %s (%s), not the node the lab found the publisher on", e.Transport, e.KilledNode, e.KillTarget)
		}
		if e.Acknowledged < 20 || e.Delivered < e.Acknowledged {
			t.Errorf("%s: %d acknowledged, %d delivered of %d sent", e.Transport, e.Acknowledged, e.Delivered, e.Sent)
		}
		// A reconnection that resumed the session but sent no 0-RTT means the
		// other gateway instance refused the shared ticket. When the cluster
		// takes the publisher back within ~150 ms, the reconnection can come
		// before the first connection's ticket was saved: neither 0-RTT nor
		// resumption then (seen once in a CI check); the sharing itself is
		// held by gateway's TestTicketKeysShared.
		switch {
		case e.Transport != TransportQUIC:
		case e.Reconnects0RTT == 0 && e.ReconnectsResumed > 0:
			t.Errorf("quic: %d reconnections resumed the session but none used 0-RTT on the other gateway instance (shared ticket keys)", e.ReconnectsResumed)
		case e.Reconnects0RTT == 0:
			t.Logf("quic: the reconnection (after %v) had no ticket yet: 0-RTT not exercised in this run", time.Duration(e.RecoverNs))
		}
		if e.RecoverNs <= 0 || e.GapNs <= 0 || e.Connections < 2 {
			logStderr(t, filepath.Join(dir, DirCells, c.Cell, "rep-1"))
			t.Errorf("%s: no recovery after the kill: recover %v, gap %v, %d connections", e.Transport,
				time.Duration(e.RecoverNs), time.Duration(e.GapNs), e.Connections)
		}
	}
	if !seen[TransportTLS] || !seen[TransportQUIC] {
		t.Errorf("transports %v; want mqtts and quic", seen)
	}
	// the report shows the failover table and figures
	sum, err := report.Generate(ctx, report.Options{Dir: dir, Resamples: 200})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Failover) != 2 {
		t.Errorf("report: %d failover rows, want 2", len(sum.Failover))
	}
	figs := 0
	for _, f := range sum.Figures {
		if strings.HasPrefix(f.Name, "failover-") {
			figs++
		}
	}
	if figs != 2 {
		t.Errorf("report: %d failover figures, want 2", figs)
	}
}

// logStderr logs the tail of every process's stderr in dir.
func logStderr(t *testing.T, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.stderr"))
	for _, f := range files {
		t.Logf("%s: %s", filepath.Base(f), tailFile(f, 1500))
	}
}
