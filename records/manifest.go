package records

import (
	"encoding/json"
	"errors"
	"time"
)

// Manifest.Shard of a directory built from other campaigns: ShardMerged
// joins a campaign's shards (lab merge), ShardPooled campaigns of the same
// cells run with different seeds, as repetitions (lab pool); Shards holds
// their manifests.
const (
	ShardMerged = "merged"
	ShardPooled = "pooled"
)

// Manifest is DIR/manifest.json: everything needed to interpret and
// reproduce a campaign.
type Manifest struct {
	// RecordsVersion is the Version of the record contracts the directory
	// was written with; 0 (absent) is the layout before it was recorded.
	RecordsVersion int              `json:"records_version,omitempty"`
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
	// RunSpans are the runs that made the results, in order: one per "lab
	// run" of the campaign (a --resume adds one), so a campaign resumed
	// hours later is not taken for one that ran all that time. Start is
	// the first run's start, End the last run's end. Absent before it was
	// recorded.
	RunSpans []RunSpan `json:"run_spans,omitempty"`
	// Shards holds the manifests of merged shard directories.
	Shards []Manifest `json:"shards,omitempty"`
	// Energy is one energy record for every experiment, as other tools
	// write it; the lab writes one per experiment instead. Experiments'
	// records win over it.
	Energy *Energy `json:"energy,omitempty"`
	// Jobs is how many cells were asked to run at once (lab run --jobs);
	// 0 in older directories (one at a time). EmulatorTiming.JobsRun says
	// how many the timing guard let run.
	Jobs int `json:"jobs,omitempty"`
	// EmulatorTiming is the link emulator's timing error and the host load
	// while the cells ran (link fabric only).
	EmulatorTiming *EmulatorTiming `json:"emulator_timing,omitempty"`
}

// RunSpan is when one run of a campaign ran.
type RunSpan struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// EmulatorTiming records the timing error of a run: how late the link
// emulator's forwarding threads wrote packets compared with the link model
// (write time minus departure time), how late an ordinary timer of the lab
// process woke (the host probe), and how late the publishers' paced sends
// left compared with their intended instants, over every cell of a run,
// judged against stated bounds (docs/lab.md, "Parallel cells").
type EmulatorTiming struct {
	// Jobs is how many cells were asked to run at once (lab run --jobs);
	// JobsRun the most that did run at once: the timing guard's admission
	// control may allow fewer (Admission says when and why).
	Jobs    int `json:"jobs"`
	JobsRun int `json:"jobs_run,omitempty"`
	// Cells is how many cell networks reported; Judged how many had enough
	// packets to give a per-cell 99th percentile; Pkts the packets.
	Cells  int   `json:"cells"`
	Judged int   `json:"cells_judged"`
	Pkts   int64 `json:"packets"`
	// P99 is the 99th percentile over every packet of the run
	// (interpolated within Hist's buckets). CellP99Median and CellP99Worst
	// are the median and largest per-cell 99th percentile; Max the
	// largest single lateness.
	P99           time.Duration `json:"p99_ns"`
	CellP99Median time.Duration `json:"cell_p99_median_ns"`
	CellP99Worst  time.Duration `json:"cell_p99_worst_ns"`
	Max           time.Duration `json:"max_ns"`
	// Hist counts lateness over all cells in power-of-two buckets.
	Hist []TimingBucket `json:"hist,omitempty"`
	// HostP99 and HostMax are how late an ordinary (not real-time) timer
	// of the lab process woke while the cells ran, measured when its
	// goroutine ran again (records before records version 4 took the
	// timer's own, back-dated time and show next to nothing): the
	// scheduling delay the node processes (broker, pub, sub) see on a
	// loaded host, which the emulator's own real-time lateness does not
	// show. HostSamples counts the wake-ups (0: not measured).
	HostP99     time.Duration `json:"host_p99_ns,omitempty"`
	HostMax     time.Duration `json:"host_max_ns,omitempty"`
	HostSamples int64         `json:"host_samples,omitempty"`
	// HostHist counts the probe's lateness in power-of-two buckets, so
	// that runs (resumed, or shards) combine into one HostP99.
	HostHist []TimingBucket `json:"host_hist,omitempty"`
	// Send is how late the node processes' paced publishers sent their
	// messages compared with each message's intended instant (the first
	// send plus seq times the interval), over every paced message of the
	// run; SendCellP99Worst the largest per-cell 99th percentile (cells
	// of at least 100 paced messages). Zero when no cell paces its sends.
	Send             *Lateness     `json:"send,omitempty"`
	SendCellP99Worst time.Duration `json:"send_cell_p99_worst_ns,omitempty"`
	// IdleP99 and IdleSamples are the host probe's figures in the short
	// idle calibration before the first cell (0: none ran).
	IdleP99     time.Duration `json:"idle_p99_ns,omitempty"`
	IdleSamples int64         `json:"idle_samples,omitempty"`
	// HostProbe says where the host probe ran: HostProbeProcess (a child
	// process of its own, scheduled like the node processes),
	// HostProbeInProcess (a thread of the lab process: every record before
	// this field; it read 0.3-1 ms later than a probe process beside it),
	// or HostProbeMixed for combined runs that differ.
	HostProbe string `json:"host_probe,omitempty"`
	// AdmitReference is the lateness (99th percentile) the admission
	// control measured while one cell ran: more cells at once are allowed
	// while they add little to it (docs/lab.md, "Admission control").
	AdmitReference time.Duration `json:"admit_reference_p99_ns,omitempty"`
	// Admission lists the changes of the number of cells allowed at once.
	Admission []AdmissionStep `json:"admission,omitempty"`
	// CellP99s holds every judged cell's 99th percentile, so that combined
	// runs give the true CellP99Median.
	CellP99s []time.Duration `json:"cell_p99s_ns,omitempty"`
	// Runs counts the runs combined into this record: a campaign resumed
	// twice, or the shards of a merged one (0 or 1: a single run).
	Runs int `json:"runs,omitempty"`
	// WarnP99 and RefuseP99 are the bounds applied: the warn bound and
	// the fail bound.
	WarnP99   time.Duration `json:"warn_p99_ns"`
	RefuseP99 time.Duration `json:"refuse_p99_ns"`
	// Status judges the largest of P99, HostP99 and Send.P99 (each
	// with at least 200 samples): ok (up to WarnP99), warn (above it) or
	// fail (above RefuseP99: the results are no evidence of the links'
	// behaviour and must not be published as such). Records before
	// records version 4 say refused where a run with several jobs
	// stopped above RefuseP99; readers treat it as fail.
	Status string `json:"status"`
	// Note says in one sentence what a warn or fail status means.
	Note string `json:"note,omitempty"`
	// LoadavgMax1 is the largest 1-minute load average sampled at the end
	// of each cell; LoadavgEnd /proc/loadavg at the last sample.
	LoadavgMax1 float64 `json:"loadavg_max_1min"`
	LoadavgEnd  string  `json:"loadavg_end,omitempty"`
	// CPUTicks and StealTicks are the CPUs' time while the cells ran and
	// the part of it the hypervisor gave to other machines (/proc/stat,
	// clock ticks summed over CPUs; 0: not measured). On a virtual
	// machine, steal is lateness that the campaign's own load does not
	// explain: a probe late at a low load average with steal of several
	// per cent waited for the hypervisor. StealPct reads them.
	CPUTicks   int64 `json:"cpu_ticks,omitempty"`
	StealTicks int64 `json:"steal_ticks,omitempty"`
}

// StealPct is the share of the CPUs' time, in per cent, that the
// hypervisor took while the cells ran; ok is false when not measured.
func (t *EmulatorTiming) StealPct() (pct float64, ok bool) {
	if t == nil || t.CPUTicks <= 0 {
		return 0, false
	}
	return 100 * float64(t.StealTicks) / float64(t.CPUTicks), true
}

// Failed reports whether the timing guard failed the run: its results
// are no evidence (status fail, or refused in older records).
func (t *EmulatorTiming) Failed() bool {
	return t != nil && (t.Status == TimingStatusFail || t.Status == TimingStatusRefused)
}

// Where the host probe ran (EmulatorTiming.HostProbe).
const (
	HostProbeProcess   = "process"
	HostProbeInProcess = "in-process"
	HostProbeMixed     = "mixed"
)

// Timing guard statuses (EmulatorTiming.Status, CellTiming.Status).
const (
	TimingStatusOK   = "ok"
	TimingStatusWarn = "warn"
	TimingStatusFail = "fail"
	// TimingStatusRefused is the fail status of records before version 4
	// (a run with several jobs that stopped above the hard bound).
	TimingStatusRefused = "refused"
)

// TimingBucket is one bar of a lateness histogram: N events were late by
// at least UpperUS/2 and less than UpperUS microseconds (the first bucket,
// UpperUS 1, holds everything below 1 µs).
type TimingBucket struct {
	UpperUS int64 `json:"upper_us"`
	N       int64 `json:"n"`
}

// Lateness summarises how late N timed events were: percentiles, the
// largest, and the histogram they pool from.
type Lateness struct {
	N    int64          `json:"n"`
	P50  time.Duration  `json:"p50_ns"`
	P99  time.Duration  `json:"p99_ns"`
	Max  time.Duration  `json:"max_ns"`
	Hist []TimingBucket `json:"hist,omitempty"`
}

// CellTiming is a cell's timing record in its done.json: how late its
// publishers' paced sends were (Send; absent when no publisher of the cell
// paces its sends) and how late the lab's host probe woke while the cell
// ran (Host). Status judges the larger 99th percentile of the two (each
// with at least 100 samples) against the campaign's bounds.
type CellTiming struct {
	Send   *Lateness `json:"send,omitempty"`
	Host   *Lateness `json:"host,omitempty"`
	Status string    `json:"status,omitempty"`
}

// AdmissionStep is one change of the number of cells the timing guard
// allows at once: from AtNs (Unix ns) on at most Limit, because the
// lateness over the window before (P99 over N samples, with Running cells
// running) said so (Reason).
type AdmissionStep struct {
	AtNs    int64         `json:"at_ns"`
	Limit   int           `json:"limit"`
	Running int           `json:"running"`
	P99     time.Duration `json:"p99_ns"`
	N       int64         `json:"n"`
	Reason  string        `json:"reason"`
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
	Energy          *Energy      `json:"energy,omitempty"`
}

// CellCounts counts a campaign's cells.
type CellCounts struct {
	Total   int `json:"total"`
	InShard int `json:"in_shard"`
	OK      int `json:"ok"`
	Failed  int `json:"failed"`
	Pending int `json:"pending"`
}

// ParseManifest decodes a manifest. Fields whose JSON has another type
// than this version's (manifests of other tools) are left zero; only a
// document that is not JSON is an error.
func ParseManifest(b []byte) (Manifest, error) {
	var m Manifest
	err := json.Unmarshal(b, &m)
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		err = nil
	}
	return m, err
}
