package lab

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/iotq/iotq/internal/buildinfo"
)

// Manifest is DIR/manifest.json: everything needed to interpret and
// reproduce a campaign.
type Manifest struct {
	Tool           ToolInfo         `json:"tool"`
	Host           HostInfo         `json:"host"`
	TCPCongestion  CongestionInfo   `json:"tcp_congestion"`
	QUICCongestion string           `json:"quic_congestion"`
	Fabric         string           `json:"fabric"`
	Scenario       string           `json:"scenario"`
	Scale          string           `json:"scale"`
	Shard          string           `json:"shard"`
	CommandLine    []string         `json:"command_line,omitempty"`
	Experiments    []ExperimentInfo `json:"experiments"`
	Start          time.Time        `json:"start"`
	End            time.Time        `json:"end,omitzero"`
	StartNs        int64            `json:"start_ns"`
	EndNs          int64            `json:"end_ns,omitempty"`
	Cells          CellCounts       `json:"cells"`
	Interrupted    bool             `json:"interrupted,omitempty"`
	// Shards holds the manifests of merged shard directories.
	Shards []Manifest `json:"shards,omitempty"`
}

// ToolInfo records the versions that shape measurements.
type ToolInfo struct {
	Version   string `json:"iotq_version"`
	Commit    string `json:"iotq_commit"`
	GoVersion string `json:"go_version"`
	QUICGo    string `json:"quic_go_version"`
	Mochi     string `json:"mochi_version"`
	Paho      string `json:"paho_version"`
	Paho5     string `json:"paho_golang_version"`
}

// HostInfo describes the machine.
type HostInfo struct {
	Hostname     string `json:"hostname"`
	Kernel       string `json:"kernel"`
	CPUs         int    `json:"cpus"`
	LoadavgStart string `json:"loadavg_start"`
	LoadavgEnd   string `json:"loadavg_end,omitempty"`
}

// CongestionInfo records TCP congestion control: pinned per experiment,
// and the host's default outside the lab's namespaces.
type CongestionInfo struct {
	Pinned      map[string]string `json:"pinned"`
	HostDefault string            `json:"host_default"`
	Note        string            `json:"note,omitempty"`
}

// ExperimentInfo records one experiment's resolved parameters.
type ExperimentInfo struct {
	Name            string       `json:"name"`
	Description     string       `json:"description,omitempty"`
	Seed            int64        `json:"seed"`
	DelayConvention string       `json:"delay_convention"`
	Links           []LinkParams `json:"links"`
	Energy          EnergyModel  `json:"energy"`
}

// CellCounts counts a campaign's cells.
type CellCounts struct {
	Total   int `json:"total"`
	InShard int `json:"in_shard"`
	OK      int `json:"ok"`
	Failed  int `json:"failed"`
	Pending int `json:"pending"`
}

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

// toolInfo reads the build information; when the binary does not know its
// commit, git is asked (in the executable's and the working directory).
func toolInfo(ctx context.Context) ToolInfo {
	bi := buildinfo.Read()
	t := ToolInfo{Version: bi.Version, Commit: bi.Commit, GoVersion: bi.GoVersion,
		QUICGo: bi.DepVersion("quic-go/quic-go"), Mochi: bi.DepVersion("mochi-mqtt/server/v2"),
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
		Tool:           toolInfo(ctx),
		Host:           HostInfo{Hostname: host, Kernel: readTrim("/proc/sys/kernel/osrelease"), CPUs: runtime.NumCPU(), LoadavgStart: loadavg()},
		TCPCongestion:  CongestionInfo{Pinned: map[string]string{}, HostDefault: hostCongestionControl()},
		QUICCongestion: "NewReno (quic-go has no other)",
		CommandLine:    os.Args,
	}
	for _, s := range specs {
		d := s.withDefaults()
		m.TCPCongestion.Pinned[d.Experiment] = d.TCPCongestion
		ei := ExperimentInfo{Name: d.Experiment, Description: d.Description, Seed: d.Seed, DelayConvention: d.Delay, Energy: d.Energy}
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
