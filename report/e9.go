package report

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/iotq/iotq/internal/stats"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/report/figplot"
)

// E9, head-of-line blocking (pattern multi-topic): one publisher connection
// sends on several periodic topics and, in the variant, a large-message
// topic beside them. The report reads it per topic class: the periodic
// topics pooled, the large topic on its own.

// Topic classes of HOLRow.
const (
	ClassPeriodic = "periodic"
	ClassLarge    = "large"
)

// HOLRow is one topic class of one multi-topic cell: its messages over all
// repetitions, one-way delays in ms (first receipts; percentiles type 7).
type HOLRow struct {
	Cell       string  `json:"cell"`
	Experiment string  `json:"experiment"`
	Profile    string  `json:"profile"`
	LossPct    float64 `json:"loss_pct"`
	Transport  string  `json:"transport"`
	// Variant names the transport as E9 compares it: TCP+TLS, QUIC single
	// stream, QUIC per-topic streams, with "+ datagrams" (holVariant).
	Variant string `json:"variant"`
	QoS     int    `json:"qos"`
	// LargeSize and LargeIntervalNs are the cell's large-message topic, 0
	// in the cells without one.
	LargeSize       int   `json:"large_size"`
	LargeIntervalNs int64 `json:"large_interval_ns"`
	// Class is ClassPeriodic (the periodic topics pooled) or ClassLarge.
	Class string `json:"class"`
	// Topics is how many topics the row pools.
	Topics        int     `json:"topics"`
	Published     int     `json:"published"`
	Delivered     int     `json:"delivered"`
	DeliveryRatio float64 `json:"delivery_ratio"`
	P50Ms         float64 `json:"p50_ms"`
	P95Ms         float64 `json:"p95_ms"`
	P99Ms         float64 `json:"p99_ms"`
	MaxMs         float64 `json:"max_ms"`
	// WorstTopicP99Ms is the highest p99 of one topic of the class (the
	// periodic topics each on their own).
	WorstTopicP99Ms float64 `json:"worst_topic_p99_ms"`

	delays []float64 // delivered messages' delays
	got    []float64 // 1 per delivered message, 0 per lost one
}

// HOLComparison is one headline comparison of E9: a ratio variant/baseline
// of the periodic topics' p99 delay or delivery ratio, per configuration
// (a pair of cells that differ only in what the question varies),
// summarised by the geometric mean over the configurations with a
// percentile bootstrap interval over them (BootstrapMethod; a group of one
// configuration resamples its two cells' messages instead).
type HOLComparison struct {
	Experiment string `json:"experiment"`
	// Question is what varies: QuestionLarge (the large topic beside the
	// periodic ones), QuestionTransport (another transport variant),
	// QuestionDatagrams (QoS 0 as QUIC datagrams against streams).
	Question string `json:"question"`
	Metric   string `json:"metric"`
	// Baseline and Variant name the two sides; Scope the cells pooled.
	Baseline string `json:"baseline"`
	Variant  string `json:"variant"`
	// Large is "with large topic", "without large topic" or "" (both).
	Large string `json:"large,omitempty"`
	// Loss is "none" (0 %) or "with loss" (every loss rate above 0).
	Loss           string  `json:"loss"`
	Configurations int     `json:"configurations"`
	BaselineValue  float64 `json:"baseline_value"`
	VariantValue   float64 `json:"variant_value"`
	Estimate       float64 `json:"estimate"`
	Lo             float64 `json:"ci_lo"`
	Hi             float64 `json:"ci_hi"`
	// Verdict: "lower", "higher" (the variant's value against the
	// baseline's, the interval excluding 1), "no difference" or
	// VerdictNoCI.
	Verdict string `json:"verdict"`
	SmallN  bool   `json:"small_n"`
	Within  bool   `json:"ci_within_configuration,omitempty"`
}

// E9 questions and metrics (HOLComparison).
const (
	QuestionLarge     = "large topic"
	QuestionTransport = "transport"
	QuestionDatagrams = "datagrams"

	MetricP99Ratio      = "periodic_p99_ratio"      // variant/baseline of the periodic topics' p99 one-way delay
	MetricDeliveryRatio = "periodic_delivery_ratio" // variant/baseline of the periodic topics' delivery ratio
)

// E9 transport variants (holVariant).
const (
	variantTCP       = "TCP+TLS"
	variantSingle    = "QUIC single stream"
	variantPerTopic  = "QUIC per-topic streams"
	datagramsVariant = " + datagrams"
)

// holVariant names a multi-topic cell's transport as E9 compares it.
func holVariant(c *CellResult) string {
	if !isQUIC(c.Transport) {
		return transportLabel(c.Transport)
	}
	strategy, dg := strings.CutSuffix(c.QUICStreams, "+datagrams")
	name := variantSingle
	switch strategy {
	case "", "control":
	case "per-topic":
		name = variantPerTopic
	default:
		name = "QUIC " + strategy
	}
	if dg {
		name += datagramsVariant
	}
	return name
}

// isMultiTopic reports whether c is a cell of pattern multi-topic.
func isMultiTopic(c *CellResult) bool { return c.Pattern == records.PatternMultiTopic }

// holResults computes the per-topic rows of every multi-topic cell and
// E9's headline comparisons; nil without such cells.
func holResults(ds *dataset, cells []*CellResult, seed uint64, resamples int) ([]*HOLRow, []*HOLComparison) {
	byCell := map[string]*CellResult{}
	for _, c := range cells {
		if isMultiTopic(c) {
			byCell[c.Cell] = c
		}
	}
	if len(byCell) == 0 {
		return nil, nil
	}
	type key struct {
		rep   int
		topic string
		seq   int64
	}
	type msg struct {
		topic string
		delay float64
		recv  bool
	}
	perCell := map[string]map[key]*msg{}
	for _, m := range ds.messages {
		if byCell[m.Cell] == nil {
			continue
		}
		mm := perCell[m.Cell]
		if mm == nil {
			mm = map[key]*msg{}
			perCell[m.Cell] = mm
		}
		k := key{m.Rep, m.Topic, m.Seq}
		cur := mm[k]
		if cur == nil {
			cur = &msg{topic: m.Topic}
			mm[k] = cur
		}
		if m.RecvNs > 0 && !cur.recv {
			d := m.DelayNs
			if d == 0 && m.SendNs > 0 {
				d = m.RecvNs - m.SendNs
			}
			cur.recv, cur.delay = true, float64(d)/1e6
		}
	}
	var rows []*HOLRow
	for _, c := range cells {
		mm := perCell[c.Cell]
		if !isMultiTopic(c) || len(mm) == 0 {
			continue
		}
		keys := make([]key, 0, len(mm))
		for k := range mm {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b key) int {
			if a.rep != b.rep {
				return a.rep - b.rep
			}
			if a.topic != b.topic {
				return strings.Compare(a.topic, b.topic)
			}
			return int(a.seq - b.seq)
		})
		classes := map[string]*HOLRow{}
		perTopic := map[string][]float64{}
		for _, k := range keys {
			m := mm[k]
			class := ClassPeriodic
			if records.IsLargeTopic(m.topic) {
				class = ClassLarge
			}
			r := classes[class]
			if r == nil {
				r = &HOLRow{Cell: c.Cell, Experiment: c.Experiment, Profile: c.Profile, LossPct: c.LossPct, Transport: c.Transport,
					Variant: holVariant(c), QoS: c.QoS, LargeSize: c.LargeSize, LargeIntervalNs: c.LargeIntervalNs, Class: class}
				classes[class] = r
			}
			r.Published++
			if _, seen := perTopic[m.topic]; !seen {
				r.Topics++
				perTopic[m.topic] = nil
			}
			if m.recv {
				r.Delivered++
				r.delays = append(r.delays, m.delay)
				r.got = append(r.got, 1)
				perTopic[m.topic] = append(perTopic[m.topic], m.delay)
			} else {
				r.got = append(r.got, 0)
			}
		}
		for _, class := range []string{ClassPeriodic, ClassLarge} {
			r := classes[class]
			if r == nil {
				continue
			}
			r.DeliveryRatio = float64(r.Delivered) / float64(r.Published)
			r.P50Ms, r.P95Ms, r.P99Ms, r.MaxMs, r.WorstTopicP99Ms = nan(), nan(), nan(), nan(), nan()
			if len(r.delays) > 0 {
				s := stats.Sorted(r.delays)
				r.P50Ms, r.P95Ms, r.P99Ms = stats.PercentileSorted(s, 50), stats.PercentileSorted(s, 95), stats.PercentileSorted(s, 99)
				r.MaxMs = s[len(s)-1]
			}
			for t, vals := range perTopic {
				if len(vals) > 0 && records.IsLargeTopic(t) == (class == ClassLarge) {
					p := stats.Percentile(vals, 99)
					if !finite(r.WorstTopicP99Ms) || p > r.WorstTopicP99Ms {
						r.WorstTopicP99Ms = p
					}
				}
			}
			rows = append(rows, r)
		}
	}
	return rows, holComparisons(rows, seed, resamples)
}

// holConf is a periodic row's configuration key without what a question
// varies.
func holConf(r *HOLRow, variant string, large bool) string {
	l := "-"
	if large {
		l = fmt.Sprintf("%d/%d", r.LargeSize, r.LargeIntervalNs)
	}
	return fmt.Sprintf("%s|%s|%g|%d|%s|%s", r.Experiment, r.Profile, r.LossPct, r.QoS, variant, l)
}

// holComparisons computes E9's headline comparisons from the periodic
// rows: the large topic's effect per transport variant; QUIC per-topic
// streams against one stream and against TCP+TLS, one stream against
// TCP+TLS (with and without the large topic); datagrams against streams
// (delivery, QoS 0).
func holComparisons(rows []*HOLRow, seed uint64, resamples int) []*HOLComparison {
	opts := stats.BootstrapOptions{Seed: seed, Resamples: resamples}
	index := map[string]*HOLRow{}
	for _, r := range rows {
		if r.Class == ClassPeriodic {
			index[holConf(r, r.Variant, r.LargeSize > 0)] = r
		}
	}
	type gkey struct{ exp, question, metric, baseline, variant, large, loss string }
	type group struct{ base, vari []*HOLRow }
	groups := map[gkey]*group{}
	var order []gkey
	add := func(k gkey, b, v *HOLRow) {
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k] = g
			order = append(order, k)
		}
		g.base, g.vari = append(g.base, b), append(g.vari, v)
	}
	largeWords := func(large bool) string {
		if large {
			return "with large topic"
		}
		return "without large topic"
	}
	for _, v := range rows {
		if v.Class != ClassPeriodic {
			continue
		}
		lossScope := "none"
		if v.LossPct > 0 {
			lossScope = "with loss"
		}
		large := v.LargeSize > 0
		if large {
			if b := index[holConf(v, v.Variant, false)]; b != nil {
				add(gkey{v.Experiment, QuestionLarge, MetricP99Ratio, "without large topic", v.Variant, "", lossScope}, b, v)
			}
		}
		for _, pair := range [][2]string{{variantSingle, variantPerTopic}, {variantTCP, variantPerTopic}, {variantTCP, variantSingle}} {
			if v.Variant != pair[1] {
				continue
			}
			if b := index[holConf(v, pair[0], large)]; b != nil {
				add(gkey{v.Experiment, QuestionTransport, MetricP99Ratio, pair[0], pair[1], largeWords(large), lossScope}, b, v)
			}
		}
		if base, ok := strings.CutSuffix(v.Variant, datagramsVariant); ok && v.QoS == 0 {
			if b := index[holConf(v, base, large)]; b != nil {
				add(gkey{v.Experiment, QuestionDatagrams, MetricDeliveryRatio, base, v.Variant, "", lossScope}, b, v)
			}
		}
	}
	value := func(r *HOLRow, metric string) float64 {
		if metric == MetricDeliveryRatio {
			return r.DeliveryRatio
		}
		return r.P99Ms
	}
	geo := func(s [][]float64) float64 { return stats.GeoMean(s[0]) }
	var out []*HOLComparison
	for _, k := range order {
		g := groups[k]
		var ratios, bv, vv []float64
		for i := range g.base {
			b, v := value(g.base[i], k.metric), value(g.vari[i], k.metric)
			if b > 0 && v > 0 && finite(b) && finite(v) {
				ratios, bv, vv = append(ratios, v/b), append(bv, b), append(vv, v)
			}
		}
		if len(ratios) == 0 {
			continue
		}
		c := &HOLComparison{Experiment: k.exp, Question: k.question, Metric: k.metric, Baseline: k.baseline, Variant: k.variant,
			Large: k.large, Loss: k.loss, Configurations: len(ratios), BaselineValue: stats.GeoMean(bv), VariantValue: stats.GeoMean(vv),
			SmallN: len(ratios) < smallN}
		iv := stats.Bootstrap([][]float64{ratios}, geo, opts)
		c.Estimate, c.Lo, c.Hi = iv.Estimate, iv.Lo, iv.Hi
		if len(ratios) == 1 {
			// one configuration: its two cells' messages resampled
			c.Lo, c.Hi = nan(), nan()
			b, v := g.base[0], g.vari[0]
			var n int
			if k.metric == MetricDeliveryRatio {
				iv = stats.Bootstrap([][]float64{v.got, b.got}, func(s [][]float64) float64 { return stats.Mean(s[0]) / stats.Mean(s[1]) }, opts)
				n = min(len(v.got), len(b.got))
			} else {
				p99 := func(xs []float64) float64 { return stats.Percentile(xs, 99) }
				iv = stats.Bootstrap([][]float64{v.delays, b.delays}, func(s [][]float64) float64 { return p99(s[0]) / p99(s[1]) }, opts)
				n = min(len(v.delays), len(b.delays))
			}
			if n >= 2 {
				c.Lo, c.Hi, c.Within = iv.Lo, iv.Hi, finite(iv.Lo)
			}
			c.SmallN = n < smallN
		}
		c.Verdict = holVerdict(c)
		out = append(out, c)
	}
	slices.SortStableFunc(out, func(a, b *HOLComparison) int {
		for _, d := range []int{strings.Compare(a.Experiment, b.Experiment), questionRank(a.Question) - questionRank(b.Question),
			strings.Compare(a.Baseline, b.Baseline), strings.Compare(a.Variant, b.Variant), strings.Compare(a.Large, b.Large),
			-strings.Compare(a.Loss, b.Loss)} {
			if d != 0 {
				return d
			}
		}
		return 0
	})
	return out
}

func questionRank(q string) int {
	return slices.Index([]string{QuestionLarge, QuestionTransport, QuestionDatagrams}, q)
}

// holVerdict reads a ratio's interval: lower or higher only where it
// excludes 1.
func holVerdict(c *HOLComparison) string {
	switch {
	case !finite(c.Lo) || !finite(c.Hi):
		return VerdictNoCI
	case c.Hi < 1:
		return "lower"
	case c.Lo > 1:
		return "higher"
	}
	return VerdictNoDifference
}

// holTable is E9's per-topic table, one row per cell and topic class.
func holTable(s *Summary) tab {
	t := tab{id: "hol", title: "Head-of-line blocking: one-way delay per topic (E9)",
		intro: "Pattern multi-topic: one publisher connection, several periodic topics (pooled in the periodic row) and, in " +
			"the variant, a large-message topic (its own row). One-way delay in ms over the delivered messages of every " +
			"repetition (first receipts; percentiles type 7); worst topic p99 = the highest p99 of one topic of the row; " +
			"delivery = delivered / published. Variant: TCP+TLS, QUIC with one stream (single stream), QUIC with a stream " +
			"per topic (per-topic streams), + datagrams: QoS 0 messages as QUIC datagrams (a message too large for one, " +
			"as the large topic's, goes on a stream).",
		head: []string{"experiment", "profile", "loss %", "variant", "QoS", "large topic", "class", "topics", "published",
			"delivered", "delivery", "p50", "p95", "p99", "max", "worst topic p99", "cell"}}
	for _, r := range s.HOL {
		t.rows = append(t.rows, []string{r.Experiment, r.Profile, loss(r.LossPct), r.Variant, strconv.Itoa(r.QoS), largeText(r),
			r.Class, strconv.Itoa(r.Topics), strconv.Itoa(r.Published), strconv.Itoa(r.Delivered), fmtF(r.DeliveryRatio, 4),
			fmtF(r.P50Ms, 3), fmtF(r.P95Ms, 3), fmtF(r.P99Ms, 3), fmtF(r.MaxMs, 3), fmtF(r.WorstTopicP99Ms, 3), r.Cell})
	}
	return t
}

func largeText(r *HOLRow) string {
	if r.LargeSize == 0 {
		return "none"
	}
	return fmt.Sprintf("%d B every %s", r.LargeSize, time.Duration(r.LargeIntervalNs))
}

// holComparisonTable renders E9's headline comparisons.
func holComparisonTable(s *Summary) tab {
	b := s.Bootstrap
	t := tab{id: "hol-headline", title: "Head-of-line blocking: headline comparisons with 95 % confidence intervals (E9)",
		intro: fmt.Sprintf("Each row pools the configurations (pairs of multi-topic cells that differ only in what the row "+
			"compares: the large topic beside the periodic ones, the transport variant, or QoS 0 as datagrams against streams) "+
			"over profiles and QoS, without loss or with loss. estimate = geometric mean of variant / baseline of the periodic "+
			"topics' p99 one-way delay (%s) or delivery ratio (%s), below 1: the variant's is lower; the baseline and variant "+
			"columns are the geometric means of each side's value (ms, or a fraction). CI: percentile bootstrap over the "+
			"configurations, B = %d resamples, seed %d (one configuration: its two cells' messages resampled); \"no difference\" "+
			"where it includes 1; small n = fewer than %d configurations.", MetricP99Ratio, MetricDeliveryRatio, b.Resamples, b.Seed, smallN),
		head: []string{"experiment", "question", "metric", "baseline", "variant", "large topic", "loss", "configs",
			"baseline value", "variant value", "estimate", "CI low", "CI high", "verdict", "small n"}}
	for _, c := range s.HOLComparisons {
		small := ""
		if c.SmallN {
			small = "yes"
		}
		t.rows = append(t.rows, []string{c.Experiment, c.Question, c.Metric, c.Baseline, c.Variant, c.Large, c.Loss,
			strconv.Itoa(c.Configurations), fmtF(c.BaselineValue, 3), fmtF(c.VariantValue, 3), fmtF(c.Estimate, 3),
			fmtF(c.Lo, 3), fmtF(c.Hi, 3), c.Verdict, small})
	}
	return t
}

// holWords are E9's lines of "Results in plain words", generated from its
// comparisons (with loss): what the large topic does to the periodic
// topics, what per-topic streams and datagrams change, and where streams
// do not help.
func holWords(s *Summary) []string {
	var out, noHelp []string
	ci := func(c *HOLComparison) string {
		n := fmt.Sprintf("%d configurations", c.Configurations)
		if c.Configurations == 1 {
			n = "1 configuration"
		}
		if c.SmallN {
			n += ", small n"
		}
		if finite(c.Lo) && finite(c.Hi) {
			return fmt.Sprintf("%s x (95 %% CI [%s, %s], %s)", fmtF(c.Estimate, 2), fmtF(c.Lo, 2), fmtF(c.Hi, 2), n)
		}
		return fmt.Sprintf("%s x (%s, no CI)", fmtF(c.Estimate, 2), n)
	}
	for _, c := range s.HOLComparisons {
		if c.Loss != "with loss" {
			continue
		}
		switch c.Question {
		case QuestionLarge:
			out = append(out, fmt.Sprintf("%s, with loss: beside a large-message topic the periodic topics' p99 delay over %s is %s "+
				"its value without it (%s ms against %s ms): **%s**.", c.Experiment, c.Variant, ci(c), fmtF(c.VariantValue, 1),
				fmtF(c.BaselineValue, 1), c.Verdict))
		case QuestionTransport:
			out = append(out, fmt.Sprintf("%s, with loss, %s: the periodic topics' p99 delay over %s is %s that over %s "+
				"(%s ms against %s ms): **%s**.", c.Experiment, c.Large, c.Variant, ci(c), c.Baseline, fmtF(c.VariantValue, 1),
				fmtF(c.BaselineValue, 1), c.Verdict))
			if c.Variant == variantPerTopic && c.Baseline == variantSingle && c.Verdict != "lower" {
				noHelp = append(noHelp, c.Large)
			}
		case QuestionDatagrams:
			out = append(out, fmt.Sprintf("%s, with loss, QoS 0: the periodic topics' delivery ratio over %s is %s that over %s "+
				"(%s against %s): **%s**.", c.Experiment, c.Variant, ci(c), c.Baseline, fmtF(c.VariantValue, 4),
				fmtF(c.BaselineValue, 4), c.Verdict))
		}
	}
	if len(noHelp) > 0 {
		out = append(out, fmt.Sprintf("**Where streams do not help** (E9): a stream per topic does not lower the periodic topics' "+
			"p99 delay against one QUIC stream %s (interval not below 1).", strings.Join(noHelp, " nor ")))
	}
	return out
}

// holFigure draws the periodic topics' p99 delay against loss per profile,
// one line per transport variant and QoS (QoS 1 dashed), for the cells
// with the large-message topic (the head-of-line case) and, in a figure of
// its own, those without.
func holFigure(s *Summary, save func(*plot.Plot, Figure) error) error {
	if len(s.HOL) == 0 {
		return nil
	}
	var profs []string
	for _, r := range s.HOL {
		if !slices.Contains(profs, r.Profile) {
			profs = append(profs, r.Profile)
		}
	}
	slices.SortStableFunc(profs, func(a, b string) int {
		if d := rank(a) - rank(b); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	for _, prof := range profs {
		for _, large := range []bool{true, false} {
			type series struct {
				variant string
				qos     int
			}
			var ser []series
			var ls []float64
			for _, r := range s.HOL {
				if r.Profile != prof || r.Class != ClassPeriodic || (r.LargeSize > 0) != large {
					continue
				}
				if k := (series{r.Variant, r.QoS}); !slices.Contains(ser, k) {
					ser = append(ser, k)
				}
				if !slices.Contains(ls, r.LossPct) {
					ls = append(ls, r.LossPct)
				}
			}
			if len(ser) == 0 {
				continue
			}
			slices.Sort(ls)
			slices.SortStableFunc(ser, func(a, b series) int {
				if d := strings.Compare(variantOrder(a.variant), variantOrder(b.variant)); d != 0 {
					return d
				}
				return a.qos - b.qos
			})
			var variants []string
			for _, k := range ser {
				if !slices.Contains(variants, k.variant) {
					variants = append(variants, k.variant)
				}
			}
			which, name := "with the large-message topic", "e9-p99-"+prof+"-large"
			if !large {
				which, name = "without a large-message topic", "e9-p99-"+prof
			}
			p := figplot.New(fmt.Sprintf("E9 %s: periodic topics' p99 delay, %s", prof, which), "loss (%)", "p99 one-way delay (ms)")
			lossTicks(p, ls)
			for _, k := range ser {
				var xys plotter.XYs
				for _, r := range s.HOL {
					if r.Profile == prof && r.Class == ClassPeriodic && (r.LargeSize > 0) == large && r.Variant == k.variant &&
						r.QoS == k.qos && finite(r.P99Ms) {
						xys = append(xys, plotter.XY{X: r.LossPct, Y: r.P99Ms})
					}
				}
				slices.SortFunc(xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
				var dashes []vg.Length
				if k.qos > 0 {
					dashes = []vg.Length{vg.Points(5), vg.Points(3)}
				}
				if err := figplot.AddLine(p, fmt.Sprintf("%s, QoS %d", k.variant, k.qos), xys,
					figplot.Other(slices.Index(variants, k.variant)), dashes, nil); err != nil {
					return fmt.Errorf("E9 figure: %w", err)
				}
			}
			if err := save(p, Figure{Name: name, Title: fmt.Sprintf("E9 %s: p99 delay of the periodic topics against loss, %s", prof, which),
				Caption: "The periodic topics' p99 one-way delay (pooled over topics and repetitions) per loss rate, one line per " +
					"transport variant (colour) and QoS (QoS 1 dashed). Datagram variants send QoS 0 only."}); err != nil {
				return err
			}
		}
	}
	return nil
}

// variantOrder sorts the transport variants: TCP+TLS, one stream,
// per-topic streams, then their datagram forms.
func variantOrder(v string) string {
	for i, w := range []string{variantTCP, variantSingle, variantPerTopic, variantSingle + datagramsVariant, variantPerTopic + datagramsVariant} {
		if v == w {
			return strconv.Itoa(i)
		}
	}
	return "9" + v
}

// holCSVHead are tables.csv's E9 columns: the periodic topics pooled and
// the large topic, empty for the cells of other patterns.
var holCSVHead = []string{"hol_periodic_p50_ms", "hol_periodic_p95_ms", "hol_periodic_p99_ms", "hol_periodic_max_ms",
	"hol_periodic_delivery_ratio", "hol_large_p50_ms", "hol_large_p95_ms", "hol_large_p99_ms", "hol_large_max_ms",
	"hol_large_delivery_ratio"}

// holCSV is a cell's values of holCSVHead.
func holCSV(s *Summary, cell string, g func(float64) string) []string {
	out := make([]string, len(holCSVHead))
	for _, r := range s.HOL {
		if r.Cell != cell {
			continue
		}
		i := 0
		if r.Class == ClassLarge {
			i = 5
		}
		copy(out[i:], []string{g(r.P50Ms), g(r.P95Ms), g(r.P99Ms), g(r.MaxMs), g(r.DeliveryRatio)})
	}
	return out
}
