package report

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/iotq/iotq/internal/stats"
	"github.com/iotq/iotq/records"
)

// Metrics of the headline comparisons (Comparison.Metric).
const (
	MetricDelayCut   = "delay_cut_pct"   // 100 x (1 - QUIC/TCP) of the cells' mean one-way delay
	MetricRSDCut     = "rsd_cut_pct"     // 100 x (1 - QUIC/TCP) of the cells' delay RSD
	MetricStartupCut = "startup_cut_pct" // 100 x (1 - QUIC/TCP) of the cells' median start-up latency
	MetricXi         = "xi"              // QUIC/TCP of the cells' mean completion time
	MetricDegrade    = "degradation_ratio"
	// MetricCommCut is 100 x (1 - QUIC/TCP) of the cells' mean
	// communication time of a batch (E8's metric), over the patterns that
	// time it (batch and batch-resume; batch-echo's echo traffic shares
	// the links).
	MetricCommCut = "comm_cut_pct"
)

// Verdicts of a comparison.
const (
	VerdictQUICBetter   = "QUIC better"
	VerdictQUICWorse    = "QUIC worse"
	VerdictNoDifference = "no difference"
	VerdictNoCI         = "one configuration: no CI"
)

// smallN is the number of configurations below which a comparison is
// flagged: a percentile bootstrap over fewer values gives an interval that
// is hardly more than their range.
const smallN = 5

// Comparison is one headline comparison of TCP+TLS (or the protocol's
// non-QUIC transport) and QUIC over a group of configurations: each
// configuration is a pair of cells that differ only in the transport; its
// ratio QUIC/TCP is taken, the ratios are summarised by their geometric
// mean, and the 95 % confidence interval is a percentile bootstrap over the
// configurations (BootstrapMethod). Cut metrics are 100 x (1 - ratio):
// positive means QUIC is lower (better).
type Comparison struct {
	Experiment string `json:"experiment"`
	Protocol   string `json:"protocol"`
	Start      string `json:"start,omitempty"`
	// Profile is the link profile, "" for every profile of the experiment.
	Profile string `json:"profile,omitempty"`
	// Loss is "none" (0 %), "with loss" (every loss rate above 0) or, for
	// the degradation, the loss rate it is taken at ("15 %").
	Loss   string `json:"loss"`
	Metric string `json:"metric"`
	// Configurations is the number of TCP/QUIC pairs.
	Configurations int `json:"configurations"`
	// TCPCell and QUICCell name the pair of a per-configuration
	// comparison (Summary.PerConfiguration); empty for a group.
	TCPCell  string `json:"tcp_cell,omitempty"`
	QUICCell string `json:"quic_cell,omitempty"`
	// TCPTransport and QUICTransport name the two sides' transports
	// (joined with "/" when the group mixes several).
	TCPTransport  string `json:"tcp_transport"`
	QUICTransport string `json:"quic_transport"`
	// TCP and QUIC are the geometric means of each side's value over the
	// configurations (delay and start-up in ms, RSD as a fraction,
	// completion time in s, degradation as a factor); NaN for xi.
	TCP  float64 `json:"tcp"`
	QUIC float64 `json:"quic"`
	// Estimate, Lo and Hi are in the metric's unit (per cent for the cut
	// metrics, a ratio for xi and the degradation).
	Estimate float64 `json:"estimate"`
	Lo       float64 `json:"ci_lo"`
	Hi       float64 `json:"ci_hi"`
	// Null is the value of no difference: 0 for a cut, 1 for a ratio.
	Null    float64 `json:"null"`
	Verdict string  `json:"verdict"`
	// SmallN flags fewer than 5 configurations (or, for a group of one,
	// fewer than 5 values in a cell).
	SmallN bool `json:"small_n"`
	// Within is set when the group has one configuration and the interval
	// resamples that configuration's own values (messages for the delay
	// and its RSD, repetitions for start-up and completion time) instead.
	Within bool `json:"ci_within_configuration,omitempty"`
	// CIsAbove and CIsBelow count the configurations (xi only) whose own
	// interval over repetitions (Summary.Xi) lies entirely above or below 1.
	CIsAbove int `json:"config_cis_above_1,omitempty"`
	CIsBelow int `json:"config_cis_below_1,omitempty"`
}

// BootstrapMethod says how the comparisons' intervals were computed.
type BootstrapMethod struct {
	Method    string  `json:"method"`
	Resamples int     `json:"resamples"`
	Seed      uint64  `json:"seed"`
	Level     float64 `json:"level"`
}

func bootstrapMethod(seed uint64, resamples int) BootstrapMethod {
	o := stats.BootstrapOptions{Seed: seed, Resamples: resamples}
	iv := stats.Bootstrap([][]float64{{1}}, func([][]float64) float64 { return 1 }, o)
	return BootstrapMethod{Resamples: iv.Resamples, Seed: iv.Seed, Level: iv.Level,
		Method: "percentile bootstrap over configurations: the per-configuration ratios QUIC/TCP are resampled with " +
			"replacement, the geometric mean of each resample is taken, and the interval is given by the 2.5th and " +
			"97.5th percentiles (type 7) of those means; math/rand/v2 PCG with a fixed seed, so a report is reproducible. " +
			"A group of one configuration resamples that configuration's own values instead (messages for the delay and its RSD, " +
			"repetitions for start-up latency and completion time; the two cells independently). " +
			"xi per configuration: the repetitions of each cell resampled independently (ratio of the means)."}
}

// cellPair is one configuration: the TCP cell and the QUIC cell that
// differ only in the transport. key is the cell the configuration's
// parameters are read from.
type cellPair struct {
	tcp, quic, key *CellResult
}

// pairCells pairs the cells of each configuration, in the cells' order. A
// QUIC cell whose broker ran another 0-RTT policy than hold is a
// configuration of its own, next to the same TCP cell.
func pairCells(cells []*CellResult) []cellPair {
	type pair struct {
		cellPair
		base string // the key without the QUIC 0-RTT policy
	}
	var order []string
	pairs := map[string]*pair{}
	for _, c := range cells {
		// one protocol per pair: TCP and QUIC of the same protocol
		base := fmt.Sprintf("%s|%s|%g|%d|%s|%s|%s", c.Experiment, c.Profile, c.LossPct, c.QoS, c.Pattern, c.variant(), protocolOf(c))
		if c.pathChange != "" {
			base += "|" + c.pathChange // E10
		}
		k := base
		if isQUIC(c.Transport) && c.QUIC0RTT != "" && c.QUIC0RTT != string(records.EarlyHold) {
			k += "|0rtt-" + c.QUIC0RTT
		}
		if l := c.streamsLabel(); l != "" {
			k += "|streams-" + l // a configuration of its own, beside the same TCP cell
		}
		p := pairs[k]
		if p == nil {
			p = &pair{cellPair: cellPair{key: c}, base: base}
			pairs[k] = p
			order = append(order, k)
		}
		if isQUIC(c.Transport) {
			if p.quic == nil {
				p.quic = c
			}
		} else if p.tcp == nil {
			p.tcp = c
		}
	}
	out := make([]cellPair, 0, len(order))
	for _, k := range order {
		p := pairs[k]
		if p.tcp == nil && k != p.base {
			if b := pairs[p.base]; b != nil {
				p.tcp = b.tcp // the TCP cell runs no QUIC policy: it stands next to each
			}
		}
		out = append(out, p.cellPair)
	}
	return out
}

// protocolOf is the cell's application protocol: the cells.csv column,
// else (a summary.json read back) what its transport name says.
func protocolOf(c *CellResult) string {
	if c.protocol != "" {
		return c.protocol
	}
	t := strings.ToLower(c.Transport)
	switch {
	case strings.HasPrefix(t, "coap"):
		return records.ProtocolCoAP
	case strings.HasPrefix(t, "amqp"):
		return records.ProtocolAMQP
	}
	return records.ProtocolMQTT
}

// comparisons computes the headline comparisons of every experiment.
func comparisons(cells []*CellResult, xi []*XiResult, batch []*BatchResult, seed uint64, resamples int) []*Comparison {
	opts := stats.BootstrapOptions{Seed: seed, Resamples: resamples}
	type groupKey struct {
		exp, proto, start, profile, loss, metric string
	}
	type group struct {
		tcp, quic, ratios []float64
		pairs             []cellPair
	}
	groups := map[groupKey]*group{}
	var order []groupKey
	add := func(k groupKey, p cellPair, tv, qv float64) {
		if !(tv > 0) || !(qv > 0) || math.IsInf(tv, 0) || math.IsInf(qv, 0) {
			return
		}
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k] = g
			order = append(order, k)
		}
		g.tcp, g.quic, g.ratios = append(g.tcp, tv), append(g.quic, qv), append(g.ratios, qv/tv)
		g.pairs = append(g.pairs, p)
	}
	degr := map[string]float64{}
	comm := map[string]float64{}
	maxLoss := map[string]float64{}
	for _, b := range batch {
		degr[b.Cell] = b.CommDegradation
		if b.Pattern != records.PatternBatchEcho {
			comm[b.Cell] = b.CommS.Mean
		}
		maxLoss[b.Experiment] = math.Max(maxLoss[b.Experiment], b.LossPct)
	}
	for _, p := range pairCells(cells) {
		if p.tcp == nil || p.quic == nil {
			continue
		}
		c := p.key
		lossScope := "none"
		if c.LossPct > 0 {
			lossScope = "with loss"
		}
		proto, start := protocolOf(c), startLabel(p.quic)
		for _, prof := range []string{"", c.Profile} {
			k := func(loss, metric string) groupKey { return groupKey{c.Experiment, proto, start, prof, loss, metric} }
			switch {
			case isBatch(c.Pattern):
				if tc, ok := comm[p.tcp.Cell]; ok {
					add(k(lossScope, MetricCommCut), p, tc, comm[p.quic.Cell])
				}
				if _, ok := degr[p.tcp.Cell]; ok && c.LossPct > 0 && c.LossPct == maxLoss[c.Experiment] {
					add(k(loss(c.LossPct)+" %", MetricDegrade), p, degr[p.tcp.Cell], degr[p.quic.Cell])
				}
			case c.Kind == KindA:
				add(k(lossScope, MetricXi), p, p.tcp.CompletionS.Mean, p.quic.CompletionS.Mean)
			case c.Kind == KindB:
				add(k(lossScope, MetricStartupCut), p, p.tcp.StartupMs.Median, p.quic.StartupMs.Median)
			default:
				add(k(lossScope, MetricDelayCut), p, p.tcp.DelayMs.Mean, p.quic.DelayMs.Mean)
				add(k(lossScope, MetricRSDCut), p, p.tcp.DelayMs.RSD, p.quic.DelayMs.RSD)
			}
		}
	}
	xiCI := map[[2]string]stats.Interval{}
	for _, x := range xi {
		xiCI[[2]string{x.TCPCell, x.QUICCell}] = x.OfMeans
	}
	geo := func(s [][]float64) float64 { return stats.GeoMean(s[0]) }
	var out []*Comparison
	for _, k := range order {
		g := groups[k]
		if k.profile != "" {
			all := groupKey{k.exp, k.proto, k.start, "", k.loss, k.metric}
			if len(groups[all].ratios) == len(g.ratios) {
				continue // the experiment's only profile: the same as its row for all profiles
			}
		}
		iv := stats.Bootstrap([][]float64{g.ratios}, geo, opts)
		cmp := &Comparison{Experiment: k.exp, Protocol: k.proto, Start: k.start, Profile: k.profile, Loss: k.loss, Metric: k.metric,
			Configurations: len(g.ratios), TCPTransport: joinTransports(g.pairs, false), QUICTransport: joinTransports(g.pairs, true), TCP: stats.GeoMean(g.tcp), QUIC: stats.GeoMean(g.quic),
			Estimate: iv.Estimate, Lo: iv.Lo, Hi: iv.Hi, Null: 1, SmallN: len(g.ratios) < smallN}
		if len(g.ratios) < 2 {
			cmp.Lo, cmp.Hi = nan(), nan()
			if len(g.pairs) == 1 {
				// one configuration: its cells' own values resampled
				// (messages or repetitions), where the raw values are at
				// hand; xi's interval over repetitions is in Summary.Xi
				p := g.pairs[0]
				var n int
				cmp.Lo, cmp.Hi, n = withinPair(p, k.metric, opts)
				if ci, ok := xiCI[[2]string{p.tcp.Cell, p.quic.Cell}]; ok && k.metric == MetricXi && !finite(cmp.Lo) {
					cmp.Lo, cmp.Hi, n = ci.Lo, ci.Hi, min(ci.NumeratorN, ci.DenomN)
				}
				cmp.Within = finite(cmp.Lo)
				cmp.SmallN = n < smallN
			}
		}
		if k.metric == MetricXi {
			cmp.TCP, cmp.QUIC = nan(), nan()
			for _, p := range g.pairs {
				if ci, ok := xiCI[[2]string{p.tcp.Cell, p.quic.Cell}]; ok {
					switch {
					case ci.Lo > 1:
						cmp.CIsAbove++
					case ci.Hi < 1:
						cmp.CIsBelow++
					}
				}
			}
		}
		if isCut(k.metric) {
			// a cut is 100 (1 - ratio): the interval's ends swap
			cmp.Null = 0
			cmp.Estimate, cmp.Lo, cmp.Hi = 100*(1-cmp.Estimate), 100*(1-cmp.Hi), 100*(1-cmp.Lo)
		}
		cmp.Verdict = verdict(cmp)
		out = append(out, cmp)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case a.Experiment != b.Experiment:
			return a.Experiment < b.Experiment
		case a.Protocol != b.Protocol:
			return a.Protocol < b.Protocol
		case a.Start != b.Start:
			return a.Start < b.Start
		case (a.Profile == "") != (b.Profile == ""):
			return a.Profile == ""
		case rank(a.Profile) != rank(b.Profile):
			return rank(a.Profile) < rank(b.Profile)
		case a.Profile != b.Profile:
			return a.Profile < b.Profile
		case metricRank(a.Metric) != metricRank(b.Metric):
			return metricRank(a.Metric) < metricRank(b.Metric)
		}
		return a.Loss > b.Loss // "with loss" before "none"
	})
	return out
}

// perConfiguration compares each configuration on its own, where the raw
// values are at hand: the mean one-way delay (periodic and closed-loop
// cells; its messages resampled) and the median start-up latency (pattern
// B; its repetitions resampled), each cell independently. xi per
// configuration is Summary.Xi.
func perConfiguration(cells []*CellResult, seed uint64, resamples int) []*Comparison {
	opts := stats.BootstrapOptions{Seed: seed, Resamples: resamples}
	var out []*Comparison
	for _, p := range pairCells(cells) {
		if p.tcp == nil || p.quic == nil {
			continue
		}
		c := p.key
		var metric string
		var tv, qv float64
		switch {
		case isBatch(c.Pattern) || c.Kind == KindA:
			continue
		case c.Kind == KindB:
			metric, tv, qv = MetricStartupCut, p.tcp.StartupMs.Median, p.quic.StartupMs.Median
		default:
			metric, tv, qv = MetricDelayCut, p.tcp.DelayMs.Mean, p.quic.DelayMs.Mean
		}
		if !(tv > 0) || !(qv > 0) {
			continue
		}
		lo, hi, n := withinPair(p, metric, opts)
		if !finite(lo) {
			continue
		}
		cmp := &Comparison{Experiment: c.Experiment, Protocol: protocolOf(c), Start: startLabel(p.quic), Profile: c.Profile,
			Loss: loss(c.LossPct) + " %", Metric: metric, Configurations: 1, TCPCell: p.tcp.Cell, QUICCell: p.quic.Cell,
			TCPTransport: p.tcp.Transport, QUICTransport: p.quic.Transport, TCP: tv, QUIC: qv,
			Estimate: 100 * (1 - qv/tv), Lo: 100 * (1 - hi), Hi: 100 * (1 - lo), Null: 0, SmallN: n < smallN, Within: true}
		cmp.Verdict = verdict(cmp)
		out = append(out, cmp)
	}
	return out
}

// withinPair is the interval of the ratio QUIC/TCP of one configuration,
// each cell's values resampled independently; NaN without raw values.
// n is the smaller of the two samples.
func withinPair(p cellPair, metric string, opts stats.BootstrapOptions) (lo, hi float64, n int) {
	var t, q []float64
	stat := stats.Mean
	switch metric {
	case MetricDelayCut:
		t, q = p.tcp.delays, p.quic.delays
	case MetricRSDCut:
		t, q, stat = p.tcp.delays, p.quic.delays, stats.RSD
	case MetricStartupCut:
		t, q, stat = p.tcp.startup, p.quic.startup, stats.Median
	case MetricXi:
		for _, r := range sortedReps(p.tcp.completion) {
			t = append(t, p.tcp.completion[r])
		}
		for _, r := range sortedReps(p.quic.completion) {
			q = append(q, p.quic.completion[r])
		}
	}
	n = min(len(t), len(q))
	if n < 2 {
		return nan(), nan(), n
	}
	iv := stats.Bootstrap([][]float64{q, t}, func(s [][]float64) float64 { return stat(s[0]) / stat(s[1]) }, opts)
	return iv.Lo, iv.Hi, n
}

// joinTransports names one side's transports of a group, in order.
func joinTransports(ps []cellPair, quic bool) string {
	var out []string
	for _, p := range ps {
		c := p.tcp
		if quic {
			c = p.quic
		}
		if !slices.Contains(out, c.Transport) {
			out = append(out, c.Transport)
		}
	}
	return strings.Join(out, "/")
}

// sideLabel names a side of a comparison for people (TCP+TLS, CoAP/UDP).
func sideLabel(transports string) string {
	var out []string
	for _, t := range strings.Split(transports, "/") {
		out = append(out, transportLabel(t))
	}
	return strings.Join(out, " or ")
}

func isCut(metric string) bool {
	return metric == MetricDelayCut || metric == MetricRSDCut || metric == MetricStartupCut ||
		metric == MetricCommCut || metric == MetricGapCut || metric == MetricFirstAfterCut
}

func metricRank(m string) int {
	for i, v := range []string{MetricDelayCut, MetricRSDCut, MetricStartupCut, MetricXi, MetricCommCut, MetricDegrade, MetricGapCut, MetricFirstAfterCut} {
		if v == m {
			return i
		}
	}
	return 99
}

// verdict reads a comparison's interval: a difference only where the
// interval excludes the value of no difference.
func verdict(c *Comparison) string {
	if !finite(c.Lo) || !finite(c.Hi) {
		return VerdictNoCI
	}
	better := c.Lo > c.Null // a cut: QUIC lower
	worse := c.Hi < c.Null
	if !isCut(c.Metric) {
		better, worse = c.Hi < c.Null, c.Lo > c.Null // a ratio: QUIC/TCP below 1
	}
	switch {
	case better:
		return VerdictQUICBetter
	case worse:
		return VerdictQUICWorse
	}
	return VerdictNoDifference
}

// metricWords names a metric for people.
func metricWords(m string) string {
	switch m {
	case MetricDelayCut:
		return "mean one-way delay"
	case MetricRSDCut:
		return "delay spread (RSD)"
	case MetricStartupCut:
		return "start-up latency of a resumed connection"
	case MetricXi:
		return "completion time of stop-and-wait messages (xi = T_QUIC / T_TCP)"
	case MetricCommCut:
		return "communication time of a batch"
	case MetricDegrade:
		return "slow-down of a batch against its own 0 % loss time"
	case MetricGapCut:
		return "delivery gap around a path change"
	case MetricFirstAfterCut:
		return "time from a path change to the first message sent after it"
	}
	return m
}

// estimateText is a comparison's estimate with its interval, in words
// ("QUIC 18.2 % lower (cut 18.2 %, 95 % CI [12.0, 23.1])", "xi 0.670 (95 %
// CI [0.550, 0.810])").
func estimateText(c *Comparison) string {
	prec := 3
	if isCut(c.Metric) {
		prec = 1
	}
	ci := ""
	if finite(c.Lo) && finite(c.Hi) {
		ci = fmt.Sprintf("95 %% CI [%s, %s]", fmtF(c.Lo, prec), fmtF(c.Hi, prec))
	}
	paren := func(s string) string {
		if ci != "" {
			s += ", " + ci
		}
		return "(" + s + ")"
	}
	switch {
	case isCut(c.Metric):
		dir := "lower"
		if c.Estimate < 0 {
			dir = "higher"
		}
		return fmt.Sprintf("QUIC %s %% %s %s", fmtF(math.Abs(c.Estimate), 1), dir, paren("cut "+fmtF(c.Estimate, 1)+" %"))
	case c.Metric == MetricXi:
		return "xi " + fmtF(c.Estimate, 3) + " " + paren("QUIC/TCP")
	}
	return "QUIC/TCP " + fmtF(c.Estimate, 3) + " " + paren("below 1: QUIC slows down less")
}

// sideText gives both sides' values where they have a unit ("QUIC 31.5
// ms against TCP+TLS 39.3 ms").
func sideText(c *Comparison) string {
	q, t := sideLabel(c.QUICTransport), sideLabel(c.TCPTransport)
	var qv, tv string
	switch c.Metric {
	case MetricDelayCut, MetricStartupCut:
		qv, tv = fmtF(c.QUIC, 1)+" ms", fmtF(c.TCP, 1)+" ms"
	case MetricRSDCut:
		qv, tv = "RSD "+pct(c.QUIC, 0)+" %", "RSD "+pct(c.TCP, 0)+" %"
	case MetricDegrade:
		qv, tv = fmtF(c.QUIC, 2)+"x", fmtF(c.TCP, 2)+"x"
	case MetricCommCut, MetricGapCut, MetricFirstAfterCut:
		qv, tv = fmtF(c.QUIC, 3)+" s", fmtF(c.TCP, 3)+" s"
	default:
		return ""
	}
	return fmt.Sprintf("%s %s against %s %s", q, qv, t, tv)
}

// comparisonTable renders the headline comparisons.
func comparisonTable(s *Summary) tab {
	b := s.Bootstrap
	t := tab{id: "headline", title: "Headline comparisons with 95 % confidence intervals",
		intro: fmt.Sprintf("Each row pools the configurations (TCP/QUIC cell pairs) of an experiment, all profiles or one, "+
			"without loss or with loss. Cut = 100 x (1 - QUIC/TCP): positive means QUIC is lower. xi and the degradation "+
			"ratio are QUIC/TCP: below 1 means QUIC is faster or slows down less. TCP and QUIC columns are the geometric means "+
			"of each side's value. CI: %s B = %d resamples, seed %d. \"no difference\" where the interval includes 0 (a cut) or 1 (a ratio); "+
			"small n = fewer than %d configurations. CIs above/below 1 (xi): configurations whose own interval over repetitions excludes 1.",
			b.Method, b.Resamples, b.Seed, smallN),
		head: []string{"experiment", "protocol", "start", "profile", "loss", "metric", "configs", "TCP", "QUIC", "estimate", "CI low", "CI high",
			"verdict", "small n", "xi CIs above 1", "xi CIs below 1"}}
	for _, c := range s.Comparisons {
		prof := c.Profile
		if prof == "" {
			prof = "all"
		}
		small := ""
		if c.SmallN {
			small = "yes"
		}
		above, below := "", ""
		if c.Metric == MetricXi {
			above, below = fmt.Sprint(c.CIsAbove), fmt.Sprint(c.CIsBelow)
		}
		prec := 3
		if isCut(c.Metric) {
			prec = 1
		}
		tv, qv := fmtF(c.TCP, 3), fmtF(c.QUIC, 3)
		t.rows = append(t.rows, []string{c.Experiment, c.Protocol, c.Start, prof, c.Loss, c.Metric, fmt.Sprint(c.Configurations),
			tv, qv, fmtF(c.Estimate, prec), fmtF(c.Lo, prec), fmtF(c.Hi, prec), c.Verdict, small, above, below})
	}
	return t
}

// protoWords names a protocol for people.
func protoWords(p string) string {
	switch p {
	case records.ProtocolMQTT:
		return "MQTT"
	case records.ProtocolAMQP:
		return "AMQP"
	case records.ProtocolCoAP:
		return "CoAP"
	}
	return p
}

// scopeWords is where a comparison holds ("E1 MQTT, wifi, with loss").
func scopeWords(c *Comparison) string {
	parts := []string{c.Experiment + " " + protoWords(c.Protocol)}
	if c.Start != "" {
		parts[0] += " (" + c.Start + ")"
	}
	prof := c.Profile
	if prof == "" {
		prof = "all profiles"
	}
	parts = append(parts, prof)
	switch c.Loss {
	case "none":
		parts = append(parts, "no loss")
	case "with loss":
		parts = append(parts, "with loss")
	default:
		parts = append(parts, "at "+c.Loss+" loss")
	}
	return strings.Join(parts, ", ")
}

// comparisonSentence is one comparison in words.
func comparisonSentence(c *Comparison) string {
	side := sideText(c)
	if side != "" {
		side = ", " + side
	}
	n := fmt.Sprintf("%d configurations", c.Configurations)
	if c.Configurations == 1 {
		n = "1 configuration"
	}
	if c.Within {
		n += ", CI over its own messages or repetitions"
	}
	if c.SmallN {
		n += ", small n"
	}
	extra := ""
	if c.Metric == MetricXi && c.CIsAbove+c.CIsBelow > 0 {
		extra = fmt.Sprintf("; per configuration, xi's own CI lies above 1 in %d and below 1 in %d", c.CIsAbove, c.CIsBelow)
	}
	return fmt.Sprintf("%s: %s%s; %s: **%s** (%s%s).", scopeWords(c), metricWords(c.Metric), side, estimateText(c), c.Verdict, n, extra)
}

// plainWords is the opening of a report: what the data say, generated
// from the comparisons and the manifest.
func plainWords(s *Summary) []string {
	var out []string
	if s.Manifest["fabric"] == "local" {
		out = append(out, "**Not emulated.** This run used `--fabric local`: every node on loopback, no link emulated. "+
			"The profile names and loss rates in the tables label the cells only; the numbers say nothing about those links.")
	}
	small := 0
	for _, c := range s.Comparisons {
		if c.Profile == "" {
			out = append(out, comparisonSentence(c))
		}
		if c.SmallN {
			small++
		}
	}
	var loses []string
	for _, c := range s.Comparisons {
		if c.Verdict == VerdictQUICWorse {
			loses = append(loses, scopeWords(c)+": "+metricWords(c.Metric)+", "+estimateText(c))
		}
	}
	switch {
	case len(s.Comparisons) == 0:
		out = append(out, "No configuration has both a TCP and a QUIC cell with data: nothing to compare.")
	case len(loses) == 0:
		out = append(out, "**Where QUIC loses:** in no comparison does the interval lie on QUIC's worse side.")
	default:
		out = append(out, "**Where QUIC loses** (interval entirely on QUIC's worse side): "+strings.Join(loses, "; ")+".")
	}
	out = append(out, holWords(s)...) // E9: report/e9.go
	if small > 0 {
		out = append(out, fmt.Sprintf("Small n: %d of %d comparisons rest on fewer than %d configurations; their intervals are hardly "+
			"more than the range of the values (marked in the table below).", small, len(s.Comparisons), smallN))
	}
	if len(s.Comparisons) > 0 {
		b := s.Bootstrap
		out = append(out, fmt.Sprintf("Intervals: 95 %%, %s B = %d resamples, seed %d. Per-profile rows are in the table \"Headline comparisons\".",
			b.Method, b.Resamples, b.Seed))
	}
	return out
}
