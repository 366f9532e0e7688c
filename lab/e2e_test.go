package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/report"
)

// TestLinkFabricWithFakeNodes checks the link adapter: namespaces come up,
// commands run in them, counters are read, the pcap is moved into place
// and nothing is left behind.
func TestLinkFabricWithFakeNodes(t *testing.T) {
	testutil.RequireNetAdmin(t, needIP)
	t.Setenv("IOTQ_LAB_FAKE", "1")
	exe, _ := os.Executable()
	r, err := NewProcRunner(ProcOptions{IOTQ: exe, Fabric: LinkFabric{Prefix: "iotqlt-"}, ReadyTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s := fakeSpec(PatternStopAndWait)
	s.Profiles = []string{"wifi"}
	s.Repetitions = 1
	dir := t.TempDir()
	res, err := Run(context.Background(), []Spec{s}, Options{Dir: dir, Runner: r})
	if err != nil || res.Failed != 0 {
		_, cells, _ := readCSV(filepath.Join(dir, FileCells))
		t.Fatalf("%+v %v %v", res, err, cells)
	}
	cell := cellsOf(t, dir)[0]
	var info struct {
		Nodes map[string]map[string]string `json:"nodes"`
	}
	b, _ := os.ReadFile(filepath.Join(dir, DirCells, cell, "network.json"))
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatal(err)
	}
	if info.Nodes[NodePub]["tcp_congestion"] != "cubic" || info.Nodes[NodePub]["broker_addr_from"] == info.Nodes[NodeSub]["broker_addr_from"] {
		t.Fatalf("network info: %s", b)
	}
	_, links, _ := readCSV(filepath.Join(dir, FileLinks))
	if len(links) != 4 {
		t.Fatalf("links.csv rows: %v", links)
	}
	if _, err := os.Stat(filepath.Join(dir, DirCells, cell, "pub.pcap")); err != nil {
		t.Fatalf("pcap: %v", err)
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	if strings.Contains(string(out), fmt.Sprintf("iotqlt-%d-", os.Getpid())) {
		t.Fatalf("namespaces left behind:\n%s", out)
	}
}

// built is the iotq binary shared by the tests of this test binary
// (removed by TestMain).
var built struct {
	once     sync.Once
	dir, bin string
	err      error
}

// buildIOTQ builds the iotq binary and checks that broker, pub and sub
// offer what the lab uses.
func buildIOTQ(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "iotq-lab-test-")
		if err != nil {
			built.err = err
			return
		}
		built.dir = dir
		built.bin = filepath.Join(dir, "iotq")
		out, err := exec.Command("go", "build", "-o", built.bin, "github.com/iotq/iotq/cmd/iotq").CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("%w\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatalf("build iotq: %v", built.err)
	}
	bin := built.bin
	for _, c := range []string{"pub", "sub", "broker"} {
		out, _ := exec.Command(bin, "help", c).CombinedOutput()
		if strings.Contains(strings.ToLower(string(out)), "not implemented") {
			t.Fatalf("iotq %s says it is not implemented", c)
		}
	}
	for _, f := range []string{"-gate", "-notify", "-ready-file", "-records", "-session-cache"} {
		var help []byte
		for _, c := range []string{"pub", "sub"} {
			out, _ := exec.Command(bin, "help", c).CombinedOutput()
			help = append(help, out...)
		}
		if !strings.Contains(string(help), f) {
			// pub and sub have landed with these flags: losing one is a
			// regression, also in CI.
			t.Fatalf("iotq pub/sub lack %s, which the lab relies on (docs/records.md)", f)
		}
	}
	return bin
}

// TestSmokeCampaignEndToEnd runs the built-in smoke scenario through real
// namespaces, emulated links and real broker, pub and sub processes.
func TestSmokeCampaignEndToEnd(t *testing.T) {
	testutil.RequireNetAdmin(t, needIP)
	if testing.Short() {
		t.Skip("end-to-end campaign (about a minute) skipped in -short mode")
	}
	bin := buildIOTQ(t)
	specs, _ := Builtin("smoke")
	var scaled []Spec
	for _, s := range specs {
		sc, err := s.Scaled(ScaleSmoke)
		if err != nil {
			t.Fatal(err)
		}
		scaled = append(scaled, sc)
	}
	r, err := NewProcRunner(ProcOptions{IOTQ: bin, Fabric: LinkFabric{Prefix: "iotqle-"}})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "smoke")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var prog strings.Builder
	res, err := Run(ctx, scaled, Options{Dir: dir, Runner: r, Progress: &prog, Scenario: "smoke", Scale: ScaleSmoke, Fabric: "link"})
	t.Logf("progress:\n%s", prog.String())
	if err != nil {
		t.Fatal(err)
	}
	cells, _ := Cells(scaled)
	// Every cell completes.
	rows, _, _ := records.ReadFile[records.CellRow](filepath.Join(dir, FileCells))
	if len(rows) != len(cells) || res.Failed != 0 {
		for _, r := range rows {
			t.Logf("%s: %s %s", r.Cell, r.Status, r.Error)
		}
		t.Fatalf("%d of %d cells, %d failed", len(rows), len(cells), res.Failed)
	}
	pathDelay := map[string]int64{}
	qos := map[string]int{}
	for _, r := range rows {
		pathDelay[r.Cell] = r.PathDelayNs
		qos[r.Cell] = r.QoS
		if r.Status != StatusOK {
			t.Errorf("cell %s: %s", r.Cell, r.Error)
		}
	}
	// QoS 1 delivery ratio 1, every delay >= the link delay, both transports.
	msgs, _, _ := records.ReadFile[records.Message](filepath.Join(dir, FileMessages))
	type count struct{ pub, got int }
	per := map[string]*count{}
	transports := map[string]int{}
	for _, m := range msgs {
		id := m.Cell
		if per[id] == nil {
			per[id] = &count{}
		}
		per[id].pub++
		transports[m.Transport]++
		if m.RecvNs == 0 {
			continue
		}
		per[id].got++
		if m.DelayNs < pathDelay[id] {
			t.Errorf("cell %s seq %d: one-way delay %v below the link delay %v", id, m.Seq, time.Duration(m.DelayNs), time.Duration(pathDelay[id]))
		}
	}
	for id, q := range qos {
		c := per[id]
		if c == nil || c.pub == 0 {
			t.Errorf("cell %s: no messages", id)
			continue
		}
		if q >= 1 && c.got != c.pub {
			t.Errorf("cell %s (QoS %d): delivered %d of %d", id, q, c.got, c.pub)
		}
		if c.got == 0 {
			t.Errorf("cell %s: nothing delivered", id)
		}
	}
	if transports[TransportTLS] == 0 || transports[TransportQUIC] == 0 {
		t.Errorf("transports in messages.csv: %v", transports)
	}
	_, links, _ := readCSV(filepath.Join(dir, FileLinks))
	_, conns, _ := readCSV(filepath.Join(dir, FileConnections))
	_, cpu, _ := readCSV(filepath.Join(dir, FileCPU))
	if len(links) == 0 || len(conns) == 0 || len(cpu) == 0 {
		t.Errorf("links %d, connections %d, cpu %d rows", len(links), len(conns), len(cpu))
	}
	for _, c := range cells {
		if st, err := os.Stat(filepath.Join(dir, DirCells, c.ID, "pub.pcap")); err != nil || st.Size() <= 24 {
			t.Errorf("cell %s: pub.pcap missing or empty: %v", c.ID, err)
		}
		// The real iotq pub anchors a paced schedule at message 0's
		// send_ns: every periodic message has its send lateness.
		d, _, err := readDone(filepath.Join(dir, DirCells, c.ID))
		switch {
		case err != nil:
			t.Error(err)
		case c.Pattern == PatternPeriodic && (d.Timing == nil || d.Timing.Send == nil || d.Timing.Send.N != int64(c.Messages*c.Repetitions)):
			t.Errorf("cell %s: send lateness %+v, want %d messages", c.ID, d.Timing, c.Messages*c.Repetitions)
		case c.Pattern == PatternPeriodic:
			t.Logf("cell %s: send lateness p50 %v p99 %v max %v", c.ID, d.Timing.Send.P50, d.Timing.Send.P99, d.Timing.Send.Max)
		}
	}
	// The report reads the directory: its files exist and the HTML page
	// references every figure; pattern B cells give startup latencies.
	sum, err := report.Generate(ctx, report.Options{Dir: dir})
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	html, err := os.ReadFile(filepath.Join(dir, "report", "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"report.md", "tables.csv", "summary.json"} {
		if _, err := os.Stat(filepath.Join(dir, "report", f)); err != nil {
			t.Errorf("report file: %v", err)
		}
	}
	if len(sum.Figures) == 0 {
		t.Error("report has no figures")
	}
	for _, f := range sum.Figures {
		if !strings.Contains(string(html), f.Name) {
			t.Errorf("report.html does not reference figure %s", f.Name)
		}
		for _, ext := range []string{".png", ".svg"} {
			if _, err := os.Stat(filepath.Join(dir, "report", "figures", f.Name+ext)); err != nil {
				t.Errorf("figure file: %v", err)
			}
		}
	}
	startup := 0
	for _, c := range sum.Cells {
		if c.StartupMs.N > 0 {
			startup++
		}
	}
	if startup == 0 {
		t.Error("no cell of the smoke run reports a startup latency")
	}
}

// TestSmokeCampaignLocalFabric runs a small campaign with the real broker,
// pub and sub on loopback (no emulation, no root): every pattern completes
// with QoS 1 and every message arrives.
func TestSmokeCampaignLocalFabric(t *testing.T) {
	if testing.Short() {
		t.Skip("builds iotq; skipped in -short mode")
	}
	bin := buildIOTQ(t)
	r, err := NewProcRunner(ProcOptions{IOTQ: bin, Fabric: LocalFabric{}, NoPcap: true})
	if err != nil {
		t.Fatal(err)
	}
	var specs []Spec
	for _, p := range []string{PatternPeriodic, PatternStopAndWait, PatternReconnect} {
		s := fakeSpec(p)
		s.Experiment = "local-" + p
		s.Transports = []string{TransportTLS, TransportQUIC}
		s.Messages, s.Repetitions = 5, 1
		specs = append(specs, s)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Run(ctx, specs, Options{Dir: dir, Runner: r})
	if err != nil {
		t.Fatal(err)
	}
	rows, _, _ := records.ReadFile[records.CellRow](filepath.Join(dir, FileCells))
	for _, r := range rows {
		if r.Status != StatusOK || r.Published != r.Delivered || r.Published == 0 {
			t.Errorf("cell %s: %s published %d delivered %d: %s", r.Cell, r.Status, r.Published, r.Delivered, r.Error)
		}
	}
	if len(rows) != 6 || res.Failed != 0 {
		t.Fatalf("%d cells, %+v", len(rows), res)
	}
	for _, r := range rows {
		// the clients' stream strategy of MQTT over QUIC cells; nothing
		// for TCP
		if want := map[string]string{TransportQUIC: "control"}[r.Transport]; r.QUICStreams != want {
			t.Errorf("cells.csv %s: quic_streams %q, want %q", r.Cell, r.QUICStreams, want)
		}
	}
	conns, _, _ := records.ReadFile[records.Connection](filepath.Join(dir, FileConnections))
	if len(conns) == 0 {
		t.Fatal("no connections.csv rows")
	}
	for _, c := range conns {
		// what each client reported in its --stats json
		if want := map[string]string{TransportQUIC: "control"}[c.Transport]; c.QUICStreamStrategy != want || c.QUICDatagrams {
			t.Errorf("connection %s %s %s: quic_stream_strategy %q datagrams %v, want %q without", c.Cell, c.Role, c.Transport, c.QUICStreamStrategy, c.QUICDatagrams, want)
		}
	}
	resumed := map[string]bool{}
	for _, c := range conns {
		if c.Role == records.RolePubResume {
			resumed[c.Transport] = c.Used0RTT || c.Resumed
			if c.FirstDeliveryNs == 0 || c.DialStartNs == 0 {
				t.Errorf("pattern B connection without timings: %+v", c)
			}
		}
	}
	if len(resumed) != 2 {
		t.Errorf("pattern B connections: %v", conns)
	}
	for tr, ok := range resumed {
		if !ok {
			t.Errorf("pattern B over %s: the second connection did not resume", tr)
		}
	}
}

// needIP checks for the ip command, which the lab's namespaces need.
func needIP() error {
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("the ip command (apt-get install iproute2)")
	}
	return nil
}

// TestLinkFabricJobsWithFakeNodes runs three cells at once through real
// namespaces (fake nodes, which send little): every cell completes, each
// network reports its timing error to the manifest with the jobs count, the publisher's egress
// setting reaches the emulator, and nothing is left behind.
func TestLinkFabricJobsWithFakeNodes(t *testing.T) {
	testutil.RequireNetAdmin(t, needIP)
	t.Setenv("IOTQ_LAB_FAKE", "1")
	exe, _ := os.Executable()
	// The bounds are not what this test checks (a loaded CI host may be
	// late): only that the measurement is recorded.
	guard := &TimingGuard{Warn: time.Hour, Refuse: time.Hour}
	r, err := NewProcRunner(ProcOptions{IOTQ: exe, Fabric: LinkFabric{Prefix: "iotqlj-", Timing: guard}, ReadyTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s := fakeSpec(PatternStopAndWait)
	s.Profiles = []string{"wifi"}
	s.Losses = []Percent{0, 1, 2}
	s.Topology.Directions = []string{DirectionEgress}
	s.Repetitions = 1
	dir := t.TempDir()
	res, err := Run(context.Background(), []Spec{s}, Options{Dir: dir, Runner: r, Jobs: 3, Timing: guard})
	if err != nil || res.Failed != 0 || res.Ran != 3 {
		_, cells, _ := readCSV(filepath.Join(dir, FileCells))
		t.Fatalf("%+v %v %v", res, err, cells)
	}
	b, err := os.ReadFile(filepath.Join(dir, FileManifest))
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.Jobs != 3 || m.EmulatorTiming == nil || m.EmulatorTiming.Cells != 3 || m.EmulatorTiming.LoadavgEnd == "" {
		t.Fatalf("manifest jobs %d, timing %+v", m.Jobs, m.EmulatorTiming)
	}
	for _, id := range cellsOf(t, dir) {
		if !strings.Contains(id, "_egress_") {
			t.Fatalf("cell %s lacks its direction", id)
		}
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	if strings.Contains(string(out), fmt.Sprintf("iotqlj-%d-", os.Getpid())) {
		t.Fatalf("namespaces left behind:\n%s", out)
	}
}
