package report

import (
	"github.com/iotq/iotq/internal/stats"
	"github.com/iotq/iotq/report/energy"
)

// Pattern kinds, normalised from the pattern column.
const (
	KindPeriodic = "periodic"
	KindA        = "A" // stop-and-wait
	KindB        = "B" // reconnect, reconnect-early
)

// Link holds the parameters of the publisher's and the subscriber's link
// that the lower bounds use.
type Link struct {
	PubDelayNs int64   `json:"pub_delay_ns"`
	SubDelayNs int64   `json:"sub_delay_ns"`
	PubRateBps float64 `json:"pub_rate_bps"`
	SubRateBps float64 `json:"sub_rate_bps"`
	// PubDirection is the impairment direction of the publisher's link
	// (records.LinkParams.Direction): "" (both), egress or ingress.
	PubDirection string `json:"pub_direction,omitempty"`
	// Source says where the values came from (cells.csv, cell.json,
	// profile defaults).
	Source string `json:"source"`
}

// CellResult holds every statistic of one cell. Delays and latencies are
// in milliseconds, completion times in seconds. NaN means "not available".
type CellResult struct {
	Cell       string  `json:"cell"`
	Experiment string  `json:"experiment"`
	Profile    string  `json:"profile"`
	LossPct    float64 `json:"loss_pct"`
	Transport  string  `json:"transport"`
	QoS        int     `json:"qos"`
	Pattern    string  `json:"pattern"`
	Kind       string  `json:"kind"`
	Size       int     `json:"size"`
	IntervalNs int64   `json:"interval_ns"`
	Publishers int     `json:"publishers"`
	Retries    int     `json:"retries"`
	Status     string  `json:"status"`
	Error      string  `json:"error,omitempty"`
	Link       Link    `json:"link"`

	Published     int           `json:"published"`
	Received      int           `json:"received"`
	DeliveryRatio float64       `json:"delivery_ratio"`
	DelayMs       stats.Summary `json:"delay_ms"`
	DelayBoundMs  float64       `json:"delay_bound_ms"`

	StartupMs      stats.Summary `json:"startup_ms"`
	StartupBoundMs float64       `json:"startup_bound_ms"`
	// StartupBoundRTTs is how many round trips of the publisher's link the
	// start-up bound holds before the message can leave the publisher
	// (startupBoundMQTT); NaN where the bound is the transport's only.
	StartupBoundRTTs float64 `json:"startup_bound_rtts"`
	// StartupRatio is the median start-up latency divided by its bound
	// (1 = as fast as the protocol allows on this link).
	StartupRatio float64 `json:"startup_ratio"`
	Resumed      int     `json:"resumed"`
	ZeroRTT      int     `json:"used_0rtt"`
	// PubReconnects counts the reconnections of the cell's publishers
	// over all repetitions (connections.csv reconnects, records version
	// 6: `iotq pub --reconnect` after a lost connection).
	PubReconnects int `json:"pub_reconnects"`
	// QUIC0RTT is the broker's QUIC 0-RTT policy of an MQTT over QUIC cell
	// (cells.csv quic_0rtt; records version 3), empty otherwise.
	QUIC0RTT string `json:"quic_0rtt,omitempty"`
	// QUICStreams is the clients' QUIC stream strategy of an MQTT over QUIC
	// cell (cells.csv quic_streams, records version 5: control, per-topic,
	// per-publish, "+datagrams"), empty otherwise and in older files.
	QUICStreams string `json:"quic_streams,omitempty"`
	// pathChange is an E10 cell's path change (done.json): the cells of
	// one transport that differ only in it are configurations of their own.
	pathChange string
	// Topics, LargeSize and LargeIntervalNs are a multi-topic cell's (E9,
	// cells.csv version 7): its periodic topics and large-message topic;
	// 0 otherwise.
	Topics          int   `json:"topics,omitempty"`
	LargeSize       int   `json:"large_size,omitempty"`
	LargeIntervalNs int64 `json:"large_interval_ns,omitempty"`

	CompletionS stats.Summary `json:"completion_s"`
	// Incomplete counts pattern-A repetitions left out of CompletionS
	// because not every message arrived.
	Incomplete int `json:"incomplete_reps"`

	Packets          int64   `json:"packets"`
	Bytes            int64   `json:"bytes"`
	Drops            int64   `json:"drops"`
	WindowS          float64 `json:"window_s"`
	PacketsPerSecond float64 `json:"packets_per_second"`
	BytesPerMessage  float64 `json:"bytes_per_delivered_message"`
	// PacketsSent are the packets the measured publisher sent into its
	// link (all it offered, lost ones included: what a device counts at
	// its interface); PacketsReceived those that reached it (offered
	// towards it minus the link's drops). Per second over WindowS.
	// CPUSeconds is the publisher processes' CPU time (user + system, all
	// repetitions; cpu.csv), on its own: NaN without cpu.csv.
	CPUSeconds float64 `json:"publisher_cpu_s"`
	// CPUMsPerMessage divides it by the distinct messages received.
	CPUMsPerMessage float64 `json:"publisher_cpu_ms_per_delivered_message"`

	PacketsSent              int64   `json:"packets_sent"`
	PacketsReceived          int64   `json:"packets_received"`
	PacketsSentPerSecond     float64 `json:"packets_sent_per_second"`
	PacketsReceivedPerSecond float64 `json:"packets_received_per_second"`

	Energy *CellEnergy `json:"energy,omitempty"`

	delays     []float64
	startup    []float64
	completion map[int]float64
	windows    []window
	repWindows map[int]*window
	upBytes    int64
	downBytes  int64
	cpuNs      int64
	hasCPU     bool
	hasLinks   bool
	// protocol is the cells.csv protocol column ("" before records
	// version 2: MQTT).
	protocol string
	// delayConvention is how the profile's delay figure was read
	// (records.DelayOneWay, records.DelayRTT), when a file says.
	delayConvention string
}

type window struct{ start, end int64 }

// CellEnergy is the energy estimate of the publisher in one cell.
type CellEnergy struct {
	Technology  string           `json:"technology"`
	RadioSource string           `json:"radio_source"`
	Radio       energy.Breakdown `json:"radio"`
	CPUSeconds  float64          `json:"cpu_s"`
	CPUJ        float64          `json:"cpu_j"`
	// TotalJ is radio + CPU energy: what the publisher's traffic costs.
	TotalJ float64 `json:"total_j"`
	// The whole-device model, as the testbed's meter saw the board: base
	// power over the window + CPU energy + radio energy.
	BaseW       float64 `json:"base_w"`
	BaseJ       float64 `json:"base_j"`
	DeviceJ     float64 `json:"device_j"`
	DeviceMeanW float64 `json:"device_mean_w"`
	PerMessageJ float64 `json:"per_delivered_message_j"`
	MeanW       float64 `json:"mean_w"`
	MeasuredJ   float64 `json:"measured_j"`
	MeasuredW   float64 `json:"measured_mean_w"`
}

// BoardBase is the base power of the whole-device energy model.
type BoardBase struct {
	W      float64 `json:"w"`
	Source string  `json:"source"`
}

// XiResult compares the completion times of the QUIC cell and the TCP cell
// of one configuration (pattern A).
type XiResult struct {
	Experiment string  `json:"experiment"`
	Profile    string  `json:"profile"`
	LossPct    float64 `json:"loss_pct"`
	QoS        int     `json:"qos"`
	Size       int     `json:"size"`
	// Variant names what else sets the configuration apart (publishers,
	// link-layer retries, the subscriber link), as in the comparison table.
	Variant  string         `json:"variant,omitempty"`
	TCPCell  string         `json:"tcp_cell"`
	QUICCell string         `json:"quic_cell"`
	TCP      string         `json:"tcp_transport"`
	Pairs    int            `json:"pairs"`
	PerRep   stats.Summary  `json:"per_repetition"`
	OfMeans  stats.Interval `json:"of_means"`
	perRep   []float64
}

// Summary is everything the report computed; summary.json holds it.
type Summary struct {
	Source       string                  `json:"source"`
	Manifest     map[string]string       `json:"manifest"`
	Files        []string                `json:"files_read"`
	Notes        []string                `json:"notes"`
	Cells        []*CellResult           `json:"cells"`
	Xi           []*XiResult             `json:"xi"`
	EnergyModels map[string]energy.Model `json:"energy_models"`
	// CPUWatts is the processor's active power, keyed "" when all
	// experiments share it, else by experiment.
	CPUWatts map[string]float64 `json:"cpu_active_w"`
	// BoardBase is the device's base power of the whole-device model, with
	// its source, keyed like CPUWatts.
	BoardBase   map[string]BoardBase `json:"board_base"`
	PowerLog    string               `json:"power_log,omitempty"`
	Figures     []Figure             `json:"figures"`
	Percentiles string               `json:"percentile_method"`
	// Batch holds the cells of the batch patterns (E8).
	Batch []*BatchResult `json:"batch,omitempty"`
	// Failover holds the cells of pattern failover (E11; report/e11.go).
	Failover []*FailoverResult `json:"failover,omitempty"`
	// PathChange holds the cells of pattern path-change (E10; report/e10.go).
	PathChange []*PathChangeResult `json:"path_change,omitempty"`
	// HOL holds the per-topic rows of pattern multi-topic (E9;
	// report/e9.go), HOLComparisons its headline comparisons.
	HOL            []*HOLRow        `json:"hol,omitempty"`
	HOLComparisons []*HOLComparison `json:"hol_comparisons,omitempty"`
	// Experiments is the per-experiment table: TCP+TLS and QUIC side by
	// side (delay, RSD, start-up latency and its ratio to the bound, xi).
	Experiments []*ExperimentSummary `json:"experiments"`
	// Comparisons are the headline comparisons (TCP vs QUIC per
	// experiment) with their bootstrap intervals; Bootstrap says how.
	Comparisons []*Comparison   `json:"comparisons"`
	Bootstrap   BootstrapMethod `json:"bootstrap"`
	// PerConfiguration compares each configuration's delay or start-up on
	// its own (its messages or repetitions resampled), where the raw
	// records were read.
	PerConfiguration []*Comparison `json:"per_configuration"`
}

// Figure is one drawn figure; its files are figures/NAME.png and
// figures/NAME.svg under the output directory.
type Figure struct {
	Name    string `json:"name"`
	Title   string `json:"title"`
	Caption string `json:"caption"`
}
