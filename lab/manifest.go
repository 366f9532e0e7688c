package lab

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/iotq/iotq/internal/buildinfo"
	"github.com/iotq/iotq/records"
)

// The manifest's types (records.Manifest: DIR/manifest.json).
type (
	Manifest       = records.Manifest
	ToolInfo       = records.ToolInfo
	HostInfo       = records.HostInfo
	CongestionInfo = records.CongestionInfo
	ExperimentInfo = records.ExperimentInfo
	CellCounts     = records.CellCounts
)

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

func hostCongestionControl() string {
	return readTrim("/proc/sys/net/ipv4/tcp_congestion_control")
}

func loadavg() string { return readTrim("/proc/loadavg") }

// cpuTimes is the first line of /proc/stat: the CPUs' time in clock
// ticks, all of it and the part stolen by the hypervisor.
type cpuTimes struct{ total, steal int64 }

// readCPUTimes reads /proc/stat's "cpu" line; ok is false where there is
// none (not Linux) or it cannot be parsed.
func readCPUTimes() (t cpuTimes, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return t, false
	}
	return parseCPUTimes(string(b))
}

// parseCPUTimes parses /proc/stat: "cpu user nice system idle iowait irq
// softirq steal guest guest_nice" (guest time is counted in user already,
// so the total is the first eight fields).
func parseCPUTimes(stat string) (t cpuTimes, ok bool) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return t, false
	}
	for i := 1; i <= 8; i++ {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return cpuTimes{}, false
		}
		t.total += v
		if i == 8 {
			t.steal = v
		}
	}
	return t, true
}

// toolInfo reads the build information; when the binary does not know its
// commit, git is asked (in the executable's and the working directory).
func toolInfo(ctx context.Context) ToolInfo {
	bi := buildinfo.Read()
	t := ToolInfo{Version: bi.Version, Commit: bi.Commit, GoVersion: bi.GoVersion,
		QUICGo: bi.DepVersion("quic-go/quic-go"), Mochi: buildinfo.Engine,
		Paho: bi.DepVersion("paho.mqtt.golang"), Paho5: bi.DepVersion("paho.golang")}
	if t.Commit == "unknown" || t.Commit == "" {
		var dirs []string
		if exe, err := os.Executable(); err == nil {
			dirs = append(dirs, filepath.Dir(exe))
		}
		if wd, err := os.Getwd(); err == nil {
			dirs = append(dirs, wd)
		}
		for _, d := range dirs {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			out, err := exec.CommandContext(ctx, "git", "-C", d, "rev-parse", "HEAD").Output()
			cancel()
			if err == nil {
				t.Commit = strings.TrimSpace(string(out)) + " (git rev-parse)"
				break
			}
		}
	}
	if t.QUICGo == "unknown" {
		t.QUICGo = "v0.65.0 (go.mod)"
	}
	return t
}

func newManifest(ctx context.Context, specs []Spec, cells []Cell) Manifest {
	host, _ := os.Hostname()
	m := Manifest{
		RecordsVersion: records.Version,
		Tool:           toolInfo(ctx),
		Host:           HostInfo{Hostname: host, Kernel: readTrim("/proc/sys/kernel/osrelease"), CPUs: runtime.NumCPU(), LoadavgStart: loadavg()},
		TCPCongestion:  CongestionInfo{Pinned: map[string]string{}, HostDefault: hostCongestionControl()},
		QUICCongestion: "NewReno (quic-go has no other)",
		CommandLine:    os.Args,
	}
	for _, s := range specs {
		d := s.withDefaults()
		m.TCPCongestion.Pinned[d.Experiment] = d.TCPCongestion
		ei := ExperimentInfo{Name: d.Experiment, Description: d.Description, Seed: d.Seed, DelayConvention: d.Delay, Energy: d.Energy.record()}
		seen := map[LinkParams]bool{}
		for _, c := range cells {
			if c.Experiment != d.Experiment {
				continue
			}
			for _, l := range []LinkParams{c.PubLink, c.SubLink} {
				if !seen[l] {
					seen[l] = true
					ei.Links = append(ei.Links, l)
				}
			}
		}
		sort.SliceStable(ei.Links, func(i, j int) bool {
			a, b := ei.Links[i], ei.Links[j]
			if a.Name != b.Name {
				return a.Name < b.Name
			}
			return a.LossPct < b.LossPct
		})
		m.Experiments = append(m.Experiments, ei)
	}
	return m
}
