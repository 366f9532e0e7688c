package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/records"
)

// fakeRunner returns a ProcRunner whose nodes are this test binary acting
// as a fake iotq, on the local fabric.
func fakeProcRunner(t *testing.T) *ProcRunner {
	t.Helper()
	t.Setenv("IOTQ_LAB_FAKE", "1")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewProcRunner(ProcOptions{IOTQ: exe, Fabric: LocalFabric{}, ReadyTimeout: 10 * time.Second, StallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func fakeSpec(pattern string) Spec {
	return Spec{Experiment: "fake", Profiles: []string{"ethernet"}, Transports: []string{TransportQUIC},
		QoS: []int{1}, Patterns: []string{pattern}, Intervals: []Duration{ms(5)}, Messages: 6, Repetitions: 2, Grace: ms(300)}
}

func TestProcRunnerPatternsWithFakeNodes(t *testing.T) {
	for _, pattern := range []string{PatternPeriodic, PatternStopAndWait, PatternReconnect, PatternBatch, PatternBatchResume, PatternClosedLoop} {
		t.Run(pattern, func(t *testing.T) {
			r := fakeProcRunner(t)
			dir := t.TempDir()
			res, err := Run(context.Background(), []Spec{fakeSpec(pattern)}, Options{Dir: dir, Runner: r})
			if err != nil {
				t.Fatal(err)
			}
			cells, _, _ := records.ReadFile[records.CellRow](filepath.Join(dir, FileCells))
			if res.Failed != 0 || len(cells) != 1 {
				t.Fatalf("result %+v, cells %v", res, cells)
			}
			want := 6 * 2
			if pattern == PatternReconnect {
				want = 2 * 2
			}
			msgs, _, _ := records.ReadFile[records.Message](filepath.Join(dir, FileMessages))
			if len(msgs) != want {
				t.Fatalf("%d message rows, want %d", len(msgs), want)
			}
			seqs := map[string]bool{}
			for _, m := range msgs {
				if m.RecvNs == 0 || m.DelayNs <= 0 {
					t.Fatalf("message not delivered, or no delay: %+v", m)
				}
				seqs[fmt.Sprintf("%d/%d", m.Rep, m.Seq)] = true
			}
			if len(seqs) != want {
				t.Fatalf("(rep, seq) not unique: %v", seqs)
			}
			// A periodic cell's done.json says how late each paced send
			// left (its due time: message 0's send plus seq intervals);
			// other patterns pace nothing.
			cellDir := filepath.Join(dir, DirCells, cells[0].Cell)
			d, _, err := readDone(cellDir)
			if err != nil {
				t.Fatal(err)
			}
			if pattern == PatternPeriodic {
				if d.Timing == nil || d.Timing.Send == nil || d.Timing.Send.N != int64(want) || d.Timing.Send.P99 < d.Timing.Send.P50 ||
					d.Timing.Send.Max < d.Timing.Send.P99 || d.Timing.Status == "" {
					t.Fatalf("periodic cell's timing record: %+v", d.Timing)
				}
				t.Logf("fake publisher's send lateness: p50 %v p99 %v max %v", d.Timing.Send.P50, d.Timing.Send.P99, d.Timing.Send.Max)
			} else if d.Timing != nil {
				t.Fatalf("a %s cell has a timing record: %+v", pattern, d.Timing)
			}
			conns, _, _ := records.ReadFile[records.Connection](filepath.Join(dir, FileConnections))
			cpu, _, _ := records.ReadFile[records.CPU](filepath.Join(dir, FileCPU))
			comp, _, _ := records.ReadFile[records.Completion](filepath.Join(dir, FileCompletions))
			roles := map[string]int{}
			for _, c := range conns {
				roles[c.Role]++
				if c.DialStartNs == 0 {
					t.Fatalf("connection without dial start: %+v", c)
				}
			}
			cpuRoles := map[string]int{}
			for _, c := range cpu {
				cpuRoles[c.Role]++
			}
			if cpuRoles[records.RoleBroker] != 1 || cpuRoles[records.RoleSub] != 2 {
				t.Fatalf("cpu rows: %+v", cpu)
			}
			switch pattern {
			case PatternStopAndWait:
				if len(comp) != 2 || comp[0].CompletionNs == 0 || comp[0].Delivered != 6 {
					t.Fatalf("completions: %+v", comp)
				}
			case PatternClosedLoop:
				if len(comp) != 0 || roles[records.RolePub] != 2 {
					t.Fatalf("completions %+v conns %+v", comp, conns)
				}
			case PatternBatch, PatternBatchResume:
				// communication time from the connection's start
				if len(comp) != 2 || comp[0].CompletionNs == 0 || comp[0].Delivered != 6 || roles[records.RolePub] != 2 {
					t.Fatalf("completions %+v conns %+v", comp, conns)
				}
				for i, c := range comp {
					if c.StartNs != conns[2*i].DialStartNs && c.StartNs != conns[2*i+1].DialStartNs {
						t.Fatalf("completion %+v does not start at a dial start: %+v", c, conns)
					}
				}
			case PatternReconnect:
				if roles[records.RolePubResume] != 2 || roles[records.RolePub] != 2 || cpuRoles[records.RolePubResume] != 2 {
					t.Fatalf("connections: %+v", conns)
				}
				for _, c := range conns {
					if c.Role == records.RolePubResume && (!c.Resumed || c.FirstDeliveryNs == 0) {
						t.Fatalf("resumed connection row: %+v", c)
					}
				}
			default:
				if len(comp) != 0 || roles[records.RolePub] != 2 || roles[records.RoleSub] != 2 {
					t.Fatalf("completions %+v conns %+v", comp, conns)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, DirCells, cellsOf(t, dir)[0], "rep-1", "sub.csv")); err != nil {
				t.Fatalf("raw files not kept: %v", err)
			}
		})
	}
}

func cellsOf(t *testing.T, dir string) []string {
	entries, err := os.ReadDir(filepath.Join(dir, DirCells))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestProcRunnerBrokerFailureFailsTheCellOnly(t *testing.T) {
	r := fakeProcRunner(t)
	t.Setenv("IOTQ_LAB_FAKE_BROKER_FAIL", "1")
	dir := t.TempDir()
	s := fakeSpec(PatternPeriodic)
	s.Transports = []string{TransportTLS, TransportQUIC}
	res, err := Run(context.Background(), []Spec{s}, Options{Dir: dir, Runner: r})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 2 {
		t.Fatalf("%+v", res)
	}
	cells, _, _ := records.ReadFile[records.CellRow](filepath.Join(dir, FileCells))
	if len(cells) == 0 || !strings.Contains(cells[0].Error, "cannot listen") {
		t.Fatalf("error column does not carry the broker's stderr: %+v", cells)
	}
}

func TestProcRunnerCancelLeavesNoChildren(t *testing.T) {
	r := fakeProcRunner(t)
	s := fakeSpec(PatternPeriodic)
	s.Intervals = []Duration{ms(200)}
	s.Messages = 100
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	dir := t.TempDir()
	start := time.Now()
	res, err := Run(ctx, []Spec{s}, Options{Dir: dir, Runner: r})
	if err == nil || !res.Interrupted {
		t.Fatalf("not interrupted: %+v %v", res, err)
	}
	if time.Since(start) > 15*time.Second {
		t.Fatalf("cancellation took %s", time.Since(start))
	}
	if _, ok, _ := readDone(filepath.Join(dir, DirCells, cellsOf(t, dir)[0])); ok {
		t.Fatal("interrupted cell marked done")
	}
	if kids := childPIDs(t); len(kids) > 0 {
		t.Fatalf("child processes left after cancellation: %v", kids)
	}
}

// childPIDs lists the processes whose parent is this test process.
func childPIDs(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	me := strconv.Itoa(os.Getpid())
	var out []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == me {
			out = append(out, e.Name()+" "+s[:i+1])
		}
	}
	return out
}

// A periodic cell of a scenario with reconnect: true runs its publisher
// with --reconnect (and a session to resume), records that on the cell and
// counts the publisher's reconnections in connections.csv; without it the
// publisher is the plain one.
func TestProcRunnerPeriodicReconnect(t *testing.T) {
	for _, on := range []bool{false, true} {
		r := fakeProcRunner(t)
		dir := t.TempDir()
		s := fakeSpec(PatternPeriodic)
		s.Reconnect = on
		if _, err := Run(context.Background(), []Spec{s}, Options{Dir: dir, Runner: r}); err != nil {
			t.Fatal(err)
		}
		cells, _, _ := records.ReadFile[records.CellRow](filepath.Join(dir, FileCells))
		if len(cells) != 1 || cells[0].Status != StatusOK {
			t.Fatalf("reconnect %v: cells %+v", on, cells)
		}
		d, _, _ := readDone(filepath.Join(dir, DirCells, cells[0].Cell))
		cmd, err := os.ReadFile(filepath.Join(dir, DirCells, cells[0].Cell, "rep-1", "pub.cmd"))
		if err != nil {
			t.Fatal(err)
		}
		if d.Cell.Reconnect != on || strings.Contains(string(cmd), "--reconnect") != on || strings.Contains(string(cmd), "--session-cache") != on {
			t.Errorf("reconnect %v: cell says %v, publisher ran %s", on, d.Cell.Reconnect, cmd)
		}
		conns, _, _ := records.ReadFile[records.Connection](filepath.Join(dir, FileConnections))
		pubReconnects := 0
		for _, c := range conns {
			if c.Role == records.RolePub {
				pubReconnects += c.Reconnects
			}
		}
		if want := map[bool]int{false: 0, true: 2}[on]; pubReconnects != want {
			t.Errorf("reconnect %v: connections.csv counts %d publisher reconnections over 2 repetitions, want %d", on, pubReconnects, want)
		}
	}
	bad := fakeSpec(PatternStopAndWait)
	bad.Reconnect = true
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "only the periodic pattern") {
		t.Errorf("reconnect with stop-and-wait: %v", err)
	}
}
