package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/link"
	"github.com/iotq/iotq/records"
)

// fakeRunner writes deterministic records derived from the cell, so two
// runs of the same cell produce identical files. failID fails one cell;
// cancelAfter cancels the campaign while running the n-th cell.
type fakeRunner struct {
	failID      string
	cancelAfter int
	cancel      context.CancelFunc
	ran         []string
}

func (f *fakeRunner) RunCell(ctx context.Context, c Cell, dir string) (CellSummary, error) {
	f.ran = append(f.ran, c.ID)
	if f.cancelAfter > 0 && len(f.ran) == f.cancelAfter {
		// Leave a partial file behind, as an interrupted real cell would.
		os.WriteFile(filepath.Join(dir, FileMessages), []byte("partial"), 0o644)
		f.cancel()
		<-ctx.Done()
		return CellSummary{}, ctx.Err()
	}
	if c.ID == f.failID {
		return CellSummary{}, errors.New("broker did not start")
	}
	m, err := records.Create[records.Message](filepath.Join(dir, FileMessages))
	if err != nil {
		return CellSummary{}, err
	}
	base := int64(1_700_000_000_000_000_000) + c.Seed%1000
	for rep := 1; rep <= c.Repetitions; rep++ {
		for seq := 1; seq <= c.Messages; seq++ {
			send := base + int64(seq)*c.IntervalNs
			d := int64(c.PathDelay()) + int64(seq)
			m.Write(records.Message{Cell: c.ID, Rep: rep, Protocol: "mqtt", Transport: c.Transport, QoS: c.QoS, Seq: int64(seq),
				Size: c.Size, SendNs: send, RecvNs: send + d, DelayNs: d, Node: NodePub, Topic: "t"})
		}
	}
	if err := m.Close(); err != nil {
		return CellSummary{}, err
	}
	n := c.Messages * c.Repetitions
	return CellSummary{Published: n, Delivered: n, RepsOK: c.Repetitions}, nil
}

func testSpecs(t *testing.T) []Spec {
	t.Helper()
	s, _ := Builtin("smoke")
	s[0].Messages = 3
	s[0].Losses = []Percent{0, 1, 5}
	return s[:1] // 3 losses x 2 qos x 2 transports = 12 cells
}

func fixedClock() func() time.Time {
	t0 := time.Unix(1_700_000_000, 0)
	n := 0
	return func() time.Time { n++; return t0.Add(time.Duration(n) * time.Second) }
}

// readResults returns the aggregate files of dir with run-dependent
// columns (times) blanked, for comparison.
func readResults(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range []string{FileMessages, FileConnections, FileLinks, FileCPU, FileCompletions, FileCells} {
		h, rows, err := readCSV(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if h == nil {
			t.Fatalf("%s missing in %s", name, dir)
		}
		var b strings.Builder
		b.WriteString(strings.Join(h, ",") + "\n")
		for _, r := range rows {
			if name == FileCells {
				r = append([]string(nil), r...)
				r[slices.Index(h, "start_ns")], r[slices.Index(h, "end_ns")] = "", ""
			}
			b.WriteString(strings.Join(r, ",") + "\n")
		}
		out[name] = b.String()
	}
	return out
}

func TestCampaignRecordsFailedCellAndGoesOn(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	specs := testSpecs(t)
	cells, _ := Cells(specs)
	r := &fakeRunner{failID: cells[2].ID}
	var prog strings.Builder
	res, err := Run(context.Background(), specs, Options{Dir: dir, Runner: r, Now: fixedClock(), Progress: &prog, Scenario: "smoke"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ran != 12 || res.Failed != 1 || res.Skipped != 0 {
		t.Fatalf("result %+v", res)
	}
	_, rows, _ := readCSV(filepath.Join(dir, FileCells))
	if len(rows) != 12 {
		t.Fatalf("cells.csv has %d rows", len(rows))
	}
	st := slices.Index(records.Header[records.CellRow](), "status") // error follows it
	if rows[2][st] != StatusFailed || !strings.Contains(rows[2][st+1], "broker did not start") || rows[0][st] != StatusOK {
		t.Fatalf("status columns: %v / %v", rows[2], rows[0])
	}
	_, msgs, _ := readCSV(filepath.Join(dir, FileMessages))
	if len(msgs) != 11*3 {
		t.Fatalf("messages.csv has %d rows, want 33", len(msgs))
	}
	if !strings.Contains(prog.String(), "12/12") || !strings.Contains(prog.String(), "ETA") || !strings.Contains(prog.String(), "FAILED") {
		t.Fatalf("progress output:\n%s", prog.String())
	}
	var m Manifest
	b, _ := os.ReadFile(filepath.Join(dir, FileManifest))
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.Cells.OK != 11 || m.Cells.Failed != 1 || m.Tool.GoVersion == "" || m.Host.Kernel == "" || m.TCPCongestion.Pinned["smoke"] != "cubic" ||
		len(m.Experiments) != 1 || len(m.Experiments[0].Links) == 0 || m.Experiments[0].Seed != 1 || m.EndNs <= m.StartNs {
		t.Fatalf("manifest: %s", b)
	}
	// Without --resume the directory is refused.
	if _, err := Run(context.Background(), specs, Options{Dir: dir, Runner: r}); err == nil || !strings.Contains(err.Error(), "--resume") {
		t.Fatalf("second run without resume: %v", err)
	}
	// --resume with another scenario is refused.
	other := testSpecs(t)
	other[0].Losses = []Percent{0}
	if _, err := Run(context.Background(), other, Options{Dir: dir, Runner: r, Resume: true}); err == nil || !strings.Contains(err.Error(), "different campaign") {
		t.Fatalf("resume of another campaign: %v", err)
	}
	// --resume --retry-failed reruns only the failed cell.
	r2 := &fakeRunner{}
	res, err = Run(context.Background(), specs, Options{Dir: dir, Runner: r2, Resume: true, RetryFailed: true})
	if err != nil || res.Ran != 1 || res.Skipped != 11 || res.Failed != 0 || len(r2.ran) != 1 || r2.ran[0] != cells[2].ID {
		t.Fatalf("retry failed: %+v %v %v", res, err, r2.ran)
	}
}

func TestResumeEqualsUninterrupted(t *testing.T) {
	specs := testSpecs(t)
	base := t.TempDir()
	whole := filepath.Join(base, "whole")
	if _, err := Run(context.Background(), specs, Options{Dir: whole, Runner: &fakeRunner{}}); err != nil {
		t.Fatal(err)
	}
	parted := filepath.Join(base, "parted")
	ctx, cancel := context.WithCancel(context.Background())
	r := &fakeRunner{cancelAfter: 5, cancel: cancel}
	var say bytes.Buffer
	res, err := Run(ctx, specs, Options{Dir: parted, Runner: r, AggregateEvery: 2, Progress: &say})
	if !errors.Is(err, context.Canceled) || !res.Interrupted || res.Ran != 4 {
		t.Fatalf("interrupted run: %+v %v", res, err)
	}
	// The operator hears at once what the interrupt does.
	if !strings.Contains(say.String(), "interrupted: ending the one cell still running") {
		t.Fatalf("no word on the interrupt in the progress output:\n%s", say.String())
	}
	// The directory is consistent: 4 complete cells aggregated, the
	// interrupted one has no done marker.
	_, rows, _ := readCSV(filepath.Join(parted, FileCells))
	if len(rows) != 4 {
		t.Fatalf("after interrupt cells.csv has %d rows", len(rows))
	}
	cells, _ := Cells(specs)
	if _, ok, _ := readDone(filepath.Join(parted, DirCells, cells[4].ID)); ok {
		t.Fatal("interrupted cell has a done marker")
	}
	// What a resumed run has left, for its estimate: the 8 cells not done.
	if p, err := Pending(parted, cells, false); err != nil || len(p) != 8 || p[0].ID != cells[4].ID {
		t.Fatalf("pending: %d cells, %v", len(p), err)
	}
	r2 := &fakeRunner{}
	res, err = Run(context.Background(), specs, Options{Dir: parted, Runner: r2, Resume: true})
	if err != nil || res.Skipped != 4 || res.Ran != 8 {
		t.Fatalf("resume: %+v %v", res, err)
	}
	if r2.ran[0] != cells[4].ID {
		t.Fatalf("resume started at %s, want %s", r2.ran[0], cells[4].ID)
	}
	// Each run has its span: a campaign resumed later is not one long run.
	if m := readManifestT(t, parted); len(m.RunSpans) != 2 || !m.RunSpans[0].Start.Equal(m.Start) || !m.RunSpans[1].End.Equal(m.End) ||
		m.RunSpans[1].Start.Before(m.RunSpans[0].End) {
		t.Errorf("resumed campaign's run spans %+v (start %v end %v), want two runs one after the other", m.RunSpans, m.Start, m.End)
	}
	a, b := readResults(t, whole), readResults(t, parted)
	for name := range a {
		if a[name] != b[name] {
			t.Errorf("%s differs between uninterrupted and resumed run:\n%s\n---\n%s", name, a[name], b[name])
		}
	}
}

func TestTwoShardsMergedEqualUnsharded(t *testing.T) {
	specs := testSpecs(t)
	base := t.TempDir()
	whole := filepath.Join(base, "whole")
	if _, err := Run(context.Background(), specs, Options{Dir: whole, Runner: &fakeRunner{}}); err != nil {
		t.Fatal(err)
	}
	var shards []string
	total := 0
	for i := 0; i < 2; i++ {
		d := filepath.Join(base, fmt.Sprintf("shard%d", i+1))
		g := &TimingGuard{}
		g.Record(link.DelaySummary{N: 1000, P99: time.Duration(i+1) * time.Millisecond, Hist: []link.Bucket{{UpperUS: 1024 << i, N: 1000}}})
		res, err := Run(context.Background(), specs, Options{Dir: d, Runner: &fakeRunner{}, Shard: i, Shards: 2, Jobs: i + 1, Timing: g})
		if err != nil {
			t.Fatal(err)
		}
		total += res.Ran
		shards = append(shards, d)
	}
	if total != 12 {
		t.Fatalf("shards ran %d cells", total)
	}
	merged := filepath.Join(base, "merged")
	if err := Merge(merged, shards); err != nil {
		t.Fatal(err)
	}
	a, b := readResults(t, whole), readResults(t, merged)
	for name := range a {
		if a[name] != b[name] {
			t.Errorf("%s differs between unsharded and merged:\n%s\n---\n%s", name, a[name], b[name])
		}
	}
	var m Manifest
	mb, _ := os.ReadFile(filepath.Join(merged, FileManifest))
	if err := json.Unmarshal(mb, &m); err != nil || len(m.Shards) != 2 || m.Cells.OK != 12 || m.Cells.Pending != 0 {
		t.Fatalf("merged manifest: %v %s", err, mb)
	}
	if len(m.RunSpans) != 0 || len(m.Shards[0].RunSpans) != 1 || len(m.Shards[1].RunSpans) != 1 {
		t.Errorf("merged manifest's run spans %+v, shards' %+v and %+v: want none of its own, one per shard", m.RunSpans, m.Shards[0].RunSpans, m.Shards[1].RunSpans)
	}
	// The emulator timing is both shards', not the first one's.
	if et := m.EmulatorTiming; et == nil || et.Runs != 2 || et.Pkts != 2000 || et.Jobs != 2 || m.Jobs != 2 ||
		et.CellP99Worst != 2*time.Millisecond || et.P99 < 1024*time.Microsecond || et.P99 >= 2048*time.Microsecond {
		t.Fatalf("merged emulator timing: %+v", et)
	}
	// A shard of another campaign is refused.
	other := testSpecs(t)
	other[0].Experiment = "other"
	od := filepath.Join(base, "other")
	if _, err := Run(context.Background(), other, Options{Dir: od, Runner: &fakeRunner{}}); err != nil {
		t.Fatal(err)
	}
	if err := Merge(filepath.Join(base, "bad"), []string{shards[0], od}); err == nil || !strings.Contains(err.Error(), "another campaign") {
		t.Fatalf("merge of different campaigns: %v", err)
	}
}

func TestRunnerPanicIsAFailedCell(t *testing.T) {
	specs := testSpecs(t)
	specs[0].Losses = []Percent{0}
	specs[0].QoS = []int{0}
	res, err := Run(context.Background(), specs, Options{Dir: t.TempDir(), Runner: panicRunner{}})
	if err != nil || res.Failed != 2 {
		t.Fatalf("%+v %v", res, err)
	}
}

type panicRunner struct{}

func (panicRunner) RunCell(context.Context, Cell, string) (CellSummary, error) { panic("boom") }
