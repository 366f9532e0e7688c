package report

import (
	"context"
	"fmt"
	"image/color"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/iotq/iotq/internal/stats"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/report/figplot"
)

// transportColor gives every transport of a figure its own colour: the
// MQTT pair blue (TCP: mqtt, mqtts; else the first transport without QUIC)
// and orange (quic; else the first QUIC transport), the others the palette
// in order of appearance (E7's coap and coap+quic beside mqtt and quic).
func transportColor(tr string, all []string) color.Color {
	primary := func(quic bool, preferred func(string) bool) string {
		first := ""
		for _, o := range all {
			if isQUIC(o) != quic {
				continue
			}
			if preferred(o) {
				return o
			}
			if first == "" {
				first = o
			}
		}
		return first
	}
	tcp := primary(false, func(o string) bool { return strings.HasPrefix(o, "mqtt") })
	quic := primary(true, func(o string) bool { return o == "quic" })
	switch tr {
	case quic:
		return figplot.Orange()
	case tcp:
		return figplot.Blue()
	}
	n := 0
	for _, o := range all {
		if o == tcp || o == quic {
			continue
		}
		if o == tr {
			return figplot.Other(n)
		}
		n++
	}
	if isQUIC(tr) {
		return figplot.Orange()
	}
	return figplot.Blue()
}

// boxSeries orders, colours and names the series of a box plot as
// transports: over TCP before over QUIC, then by name; a series may name a
// variant after its transport ("quic, broker 0-RTT accept") and sorts
// with its transport.
func boxSeries() figplot.Series {
	overQUIC := func(series string) bool { tr, _, _ := strings.Cut(series, ","); return isQUIC(tr) }
	return figplot.Series{
		Less: func(a, b string) bool {
			if overQUIC(a) != overQUIC(b) {
				return !overQUIC(a)
			}
			return a < b
		},
		Color: transportColor,
		Label: transportLabel,
	}
}

// keepsYRange says whether a figure keeps its data's y range: box plots
// and CDFs show distributions, xi is drawn with its confidence intervals.
func keepsYRange(name string) bool {
	for _, p := range []string{"delay-box-", "completion-box-", "startup-box-", "delay-cdf-", "xi-"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// labelWords spells a variant label out for a figure's title ("100B,
// sub link 50ms 10Gbit/s, 2 retries" becomes "100 B payload, subscriber
// link 50ms at 10 Gbit/s, 2 link-layer retries"); file names keep the
// short label.
func labelWords(label string) string {
	parts := strings.Split(label, ", ")
	for i, p := range parts {
		switch {
		case strings.HasSuffix(p, "B") && strings.Trim(p[:len(p)-1], "0123456789") == "" && len(p) > 1:
			parts[i] = p[:len(p)-1] + " B payload"
		case strings.HasPrefix(p, "sub link "):
			f := strings.Fields(strings.TrimPrefix(p, "sub link "))
			if len(f) == 2 {
				rate := f[1]
				for _, u := range []string{"Gbit/s", "Mbit/s", "kbit/s"} {
					rate = strings.Replace(rate, u, " "+u, 1)
				}
				parts[i] = "subscriber link " + f[0] + " each way at " + rate
			}
		case strings.HasSuffix(p, " retries"):
			parts[i] = strings.TrimSuffix(p, " retries") + " link-layer retries"
		}
	}
	return strings.Join(parts, ", ")
}

// transportLabel names a transport in a legend: the stack it runs on,
// not its URL scheme.
func transportLabel(tr string) string {
	switch tr {
	case "mqtts", "amqps":
		return "TCP+TLS"
	case "quic", "amqp+quic":
		return "QUIC"
	case "mqtt", "amqp":
		return "TCP"
	case "coap":
		return "CoAP/UDP"
	case "coap+quic":
		return "CoAP/QUIC"
	case "ws":
		return "WebSocket"
	case "wss":
		return "WebSocket+TLS"
	}
	return tr
}

// drawFigures draws every figure the data allows into dir as PNG and SVG.
func drawFigures(ctx context.Context, s *Summary, dir string, logCDF bool) ([]Figure, error) {
	var figs []Figure
	save := func(p *plot.Plot, f Figure) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		// point estimates start their y axis at zero, so two points a few
		// per cent apart do not look like a factor; distributions (boxes,
		// CDFs) and xi (drawn with its intervals) keep the data's range
		fromZero := p.Y.Min >= 0 && !keepsYRange(f.Name)
		if fromZero {
			p.Y.Min = 0
		}
		// a little room around the data (the legend is outside)
		if span := p.Y.Max - p.Y.Min; span > 0 {
			p.Y.Max += 0.05 * span
			if !fromZero {
				p.Y.Min -= 0.05 * span
			}
		} else {
			p.Y.Max++
			p.Y.Min--
		}
		if err := figplot.Render(p, dir, f.Name); err != nil {
			return err
		}
		figs = append(figs, f)
		return nil
	}
	for _, prof := range profiles(s.Cells) {
		for _, kind := range []string{KindPeriodic, KindA, KindB} {
			all := selectCells(s.Cells, prof, kind)
			// cells of one kind but several patterns (E8's batch, batch-echo
			// and batch-resume; B's reconnect and reconnect-early) get figures
			// of their own: boxes and lines of one transport and loss never
			// mix patterns
			groups, labels := splitVariants(all, true)
			if kind == KindPeriodic && len(groups) > 1 && len(losses(all)) == 1 {
				// a sweep over sizes or intervals at one loss rate (E3a):
				// compare the variants side by side instead of lines over loss
				if err := variantFigures(all, prof, save); err != nil {
					return figs, err
				}
				continue
			}
			if kind == KindPeriodic {
				// E1-E3 run with the publisher's egress impaired and as the
				// symmetric variant: one figure shows both side by side
				if err := directionFigure(all, prof, save); err != nil {
					return figs, err
				}
			}
			for i, cs := range groups {
				// a profile with several variants (sizes, intervals, publishers,
				// subscriber links) gets one figure per variant
				name, title := prof, prof
				if len(groups) > 1 {
					name = prof + "-" + experimentOf(cs) + "-" + labels[i]
					title = prof + ", " + experimentOf(cs) + " " + labelWords(labels[i])
				}
				var err error
				switch kind {
				case KindPeriodic:
					err = periodicFigures(cs, name, title, logCDF, save)
				case KindA:
					err = completionFigures(cs, s.Xi, name, title, save)
				case KindB:
					err = startupFigures(cs, name, title, save)
				}
				if err != nil {
					return figs, err
				}
			}
		}
	}
	if err := failoverFigure(s, save); err != nil { // E11: report/e11.go
		return figs, err
	}
	if err := pathChangeFigure(s, save); err != nil { // E10: report/e10.go
		return figs, err
	}
	if err := holFigure(s, save); err != nil { // E9: report/e9.go
		return figs, err
	}
	return figs, nil
}

func profiles(cs []*CellResult) []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range cs { // already sorted by experiment, profile rank
		if !seen[c.Profile] {
			seen[c.Profile] = true
			out = append(out, c.Profile)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if rank(out[i]) != rank(out[j]) {
			return rank(out[i]) < rank(out[j])
		}
		return out[i] < out[j]
	})
	return out
}

// splitVariants groups cells by experiment and variant (and, with
// byPattern, pattern: reconnect and reconnect-early get figures of their
// own), in order of appearance; labels name each group.
func splitVariants(cs []*CellResult, byPattern bool) ([][]*CellResult, []string) {
	var groups [][]*CellResult
	var labels []string
	idx := map[string]int{}
	patterns := map[string]bool{}
	for _, c := range cs {
		patterns[c.Pattern] = true
	}
	for _, c := range cs {
		k := c.Experiment + "|" + c.variant()
		label := c.variantLabel()
		if byPattern && len(patterns) > 1 {
			k += "|" + c.Pattern
			label = strings.TrimPrefix(label+", "+c.Pattern, ", ")
		}
		i, ok := idx[k]
		if !ok {
			i = len(groups)
			idx[k] = i
			groups = append(groups, nil)
			labels = append(labels, label)
		}
		groups[i] = append(groups[i], c)
	}
	return groups, labels
}

func experimentOf(cs []*CellResult) string {
	if len(cs) == 0 {
		return ""
	}
	return cs[0].Experiment
}

func selectCells(cs []*CellResult, prof, kind string) []*CellResult {
	var out []*CellResult
	for _, c := range cs {
		if c.Profile == prof && c.Kind == kind {
			out = append(out, c)
		}
	}
	return out
}

func slug(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if (ch < 'a' || ch > 'z') && (ch < 'A' || ch > 'Z') && (ch < '0' || ch > '9') && ch != '-' {
			b[i] = '-'
		}
	}
	out := strings.Trim(strings.Join(strings.FieldsFunc(string(b), func(r rune) bool { return r == '-' }), "-"), "-")
	if out == "" {
		return "none"
	}
	return out
}

func transports(cs []*CellResult) []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range cs {
		if !seen[c.Transport] {
			seen[c.Transport] = true
			out = append(out, c.Transport)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if isQUIC(out[i]) != isQUIC(out[j]) {
			return !isQUIC(out[i])
		}
		return out[i] < out[j]
	})
	return out
}

func losses(cs []*CellResult) []float64 {
	var out []float64
	seen := map[float64]bool{}
	for _, c := range cs {
		if !seen[c.LossPct] {
			seen[c.LossPct] = true
			out = append(out, c.LossPct)
		}
	}
	sort.Float64s(out)
	return out
}

func minQoS(cs []*CellResult) int {
	q := math.MaxInt
	for _, c := range cs {
		q = min(q, c.QoS)
	}
	return q
}

// lossTicks labels the x axis with the loss rates that were measured.
func lossTicks(p *plot.Plot, ls []float64) {
	if len(ls) == 0 {
		return
	}
	ticks := make([]plot.Tick, len(ls))
	for i, l := range ls {
		ticks[i] = plot.Tick{Value: l, Label: loss(l)}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	if len(ls) == 1 {
		p.X.Min, p.X.Max = ls[0]-0.5, ls[0]+0.5
	}
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// lineByLoss plots value(c) against loss, one line per transport, for the
// cells that pass keep; bound adds the dashed lower-bound line.
func lineByLoss(p *plot.Plot, cs []*CellResult, keep func(*CellResult) bool, value func(*CellResult) float64, label func(tr string) string, bound func(*CellResult) float64) (int, error) {
	trs := transports(cs)
	lossTicks(p, losses(cs))
	n := 0
	for _, tr := range trs {
		var xys plotter.XYs
		for _, c := range cs {
			if c.Transport == tr && keep(c) && finite(value(c)) {
				xys = append(xys, plotter.XY{X: c.LossPct, Y: value(c)})
			}
		}
		sort.SliceStable(xys, func(i, j int) bool { return xys[i].X < xys[j].X })
		if err := figplot.AddLine(p, label(tr), xys, transportColor(tr, trs), nil, nil); err != nil {
			return n, err
		}
		n += len(xys)
	}
	if bound != nil {
		var xys plotter.XYs
		seen := map[float64]bool{}
		for _, c := range cs {
			if keep(c) && finite(bound(c)) && !seen[c.LossPct] {
				seen[c.LossPct] = true
				xys = append(xys, plotter.XY{X: c.LossPct, Y: bound(c)})
			}
		}
		sort.SliceStable(xys, func(i, j int) bool { return xys[i].X < xys[j].X })
		if err := figplot.AddLine(p, "physical lower bound", xys, figplot.Grey(), []vg.Length{vg.Points(4), vg.Points(3)}, draw.PlusGlyph{}); err != nil {
			return n, err
		}
	}
	return n, nil
}

func periodicFigures(cs []*CellResult, fname, prof string, logCDF bool, save func(*plot.Plot, Figure) error) error {
	q0 := minQoS(cs)
	keep := func(c *CellResult) bool { return c.QoS == q0 && c.DelayMs.N > 0 }
	qlabel := "QoS " + strconv.Itoa(q0)
	name := slug(fname)

	p := figplot.New(fmt.Sprintf("Mean one-way delay vs loss: %s (%s)", prof, qlabel), "loss (%)", "mean one-way delay (ms)")
	n, err := lineByLoss(p, cs, keep, func(c *CellResult) float64 { return c.DelayMs.Mean }, transportLabel,
		func(c *CellResult) float64 { return c.DelayBoundMs })
	if err != nil {
		return err
	}
	if n > 0 {
		if err := save(p, Figure{Name: "delay-mean-" + name, Title: "Mean delay vs loss, " + prof,
			Caption: "Mean one-way delay per transport (" + qlabel + "); dashed: physical lower bound (propagation + serialization)."}); err != nil {
			return err
		}
	}

	// box plots, whiskers at the 5th and 95th percentiles
	var groups []figplot.BoxGroup
	for _, c := range cs {
		if keep(c) {
			groups = append(groups, figplot.BoxGroup{Category: loss(c.LossPct) + "%", Series: c.Transport,
				Box: stats.BoxPercentile(c.delays, 5, 95), Bound: c.DelayBoundMs})
		}
	}
	if len(groups) > 0 {
		p := figplot.New(fmt.Sprintf("One-way delay: %s (%s)", prof, qlabel), "loss", "one-way delay (ms)")
		if err := figplot.AddBoxes(p, groups, boxSeries()); err != nil {
			return err
		}
		if err := save(p, Figure{Name: "delay-box-" + name, Title: "Delay distribution, " + prof,
			Caption: "Box: 25th, 50th, 75th percentiles; whiskers: 5th and 95th percentiles; points: values outside; triangles: physical lower bound. " + figplot.BoxNote}); err != nil {
			return err
		}
	}
	if err := delayCDF(cs, keep, name, prof, qlabel, logCDF, save); err != nil {
		return err
	}

	// RSD bars
	if err := rsdBars(cs, keep, name, prof, qlabel, save); err != nil {
		return err
	}

	// QoS comparison: one line per transport and QoS
	qos := map[int]bool{}
	for _, c := range cs {
		qos[c.QoS] = true
	}
	if len(qos) > 1 {
		p := figplot.New("Mean one-way delay by QoS: "+prof, "loss (%)", "mean one-way delay (ms)")
		lossTicks(p, losses(cs))
		trs := transports(cs)
		var qs []int
		for q := range qos {
			qs = append(qs, q)
		}
		sort.Ints(qs)
		glyphs := []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{}}
		dashes := [][]vg.Length{nil, {vg.Points(6), vg.Points(2)}, {vg.Points(2), vg.Points(2)}, {vg.Points(8), vg.Points(2), vg.Points(2), vg.Points(2)}}
		for qi, q := range qs {
			for _, tr := range trs {
				var xys plotter.XYs
				for _, c := range cs {
					if c.QoS == q && c.Transport == tr && c.DelayMs.N > 0 {
						xys = append(xys, plotter.XY{X: c.LossPct, Y: c.DelayMs.Mean})
					}
				}
				if err := figplot.AddLine(p, fmt.Sprintf("%s QoS %d", transportLabel(tr), q), xys, transportColor(tr, trs), dashes[qi%len(dashes)], glyphs[qi%len(glyphs)]); err != nil {
					return err
				}
			}
		}
		var bxys plotter.XYs
		seen := map[float64]bool{}
		for _, c := range cs {
			if c.QoS == q0 && finite(c.DelayBoundMs) && !seen[c.LossPct] {
				seen[c.LossPct] = true
				bxys = append(bxys, plotter.XY{X: c.LossPct, Y: c.DelayBoundMs})
			}
		}
		sort.SliceStable(bxys, func(i, j int) bool { return bxys[i].X < bxys[j].X })
		if err := figplot.AddLine(p, "physical lower bound", bxys, figplot.Grey(), []vg.Length{vg.Points(4), vg.Points(3)}, draw.PlusGlyph{}); err != nil {
			return err
		}
		if err := save(p, Figure{Name: "qos-" + name, Title: "QoS comparison, " + prof,
			Caption: "Mean one-way delay per transport and QoS level; dashed grey: physical lower bound."}); err != nil {
			return err
		}
	}

	// energy per delivered message
	hasEnergy := false
	for _, c := range cs {
		if keep(c) && c.Energy != nil && finite(c.Energy.PerMessageJ) && c.Energy.TotalJ > 0 {
			hasEnergy = true
		}
	}
	if hasEnergy {
		p := figplot.New(fmt.Sprintf("Publisher energy per delivered message: %s (%s)", prof, qlabel), "loss (%)", "energy per delivered message (mJ)")
		if _, err := lineByLoss(p, cs, keep, func(c *CellResult) float64 {
			if c.Energy == nil {
				return math.NaN()
			}
			return c.Energy.PerMessageJ * 1000
		}, func(tr string) string { return tr }, nil); err != nil {
			return err
		}
		if err := save(p, Figure{Name: "energy-" + name, Title: "Energy per message, " + prof,
			Caption: "Estimated publisher energy (radio power-state model + CPU time x active power) per delivered message; see the energy tables for the parts and parameters."}); err != nil {
			return err
		}
	}

	// packets per second, per direction: sent by the publisher (what the
	// testbed counted at the device) apart from received by it
	hasPPS := false
	for _, c := range cs {
		if keep(c) && finite(c.PacketsSentPerSecond) {
			hasPPS = true
		}
	}
	if hasPPS {
		for _, d := range []struct {
			name, words, caption string
			value                func(*CellResult) float64
		}{
			{"pps-sent-", "sent by the publisher", "IP packets per second the publisher sent into its link (emulator counters; lost ones included, as a device counts what it sends), over the cell's window.", func(c *CellResult) float64 { return c.PacketsSentPerSecond }},
			{"pps-received-", "received by the publisher", "IP packets per second that reached the publisher through its link (sent towards it minus the link's drops; emulator counters), over the cell's window.", func(c *CellResult) float64 { return c.PacketsReceivedPerSecond }},
		} {
			p := figplot.New(fmt.Sprintf("Packets per second %s: %s (%s)", d.words, prof, qlabel), "loss (%)", "packets per second "+d.words)
			if _, err := lineByLoss(p, cs, keep, d.value, func(tr string) string { return tr }, nil); err != nil {
				return err
			}
			if err := save(p, Figure{Name: d.name + name, Title: "Packets per second " + d.words + ", " + prof, Caption: d.caption}); err != nil {
				return err
			}
		}
	}
	return nil
}

func rsdBars(cs []*CellResult, keep func(*CellResult) bool, name, prof, qlabel string, save func(*plot.Plot, Figure) error) error {
	ls := losses(cs)
	trs := transports(cs)
	labels := make([]string, len(ls))
	for i, l := range ls {
		labels[i] = loss(l) + "%"
	}
	series := make([]figplot.BarSeries, len(trs))
	for i, tr := range trs {
		series[i] = figplot.BarSeries{Name: transportLabel(tr), Color: transportColor(tr, trs), Values: nanValues(len(ls))}
		for j, l := range ls {
			for _, c := range cs {
				if c.Transport == tr && c.LossPct == l && keep(c) && finite(c.DelayMs.RSD) {
					series[i].Values[j] = c.DelayMs.RSD * 100
				}
			}
		}
	}
	p := figplot.New(fmt.Sprintf("RSD of the one-way delay: %s (%s)", prof, qlabel), "loss", "RSD (%)")
	drawn, err := figplot.AddGroupedBars(p, labels, series, vg.Points(200), vg.Points(24))
	if err != nil || drawn == 0 {
		return err
	}
	return save(p, Figure{Name: "rsd-" + name, Title: "RSD of the delay, " + prof,
		Caption: "Relative standard deviation (sample SD / mean) of the one-way delay per loss rate and transport."})
}

// nanValues is n values with no bar (figplot.BarSeries).
func nanValues(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = math.NaN()
	}
	return v
}

func completionFigures(cs []*CellResult, xi []*XiResult, fname, prof string, save func(*plot.Plot, Figure) error) error {
	inGroup := map[string]bool{}
	for _, c := range cs {
		inGroup[c.Cell] = true
	}
	var groups []figplot.BoxGroup
	for _, c := range cs {
		if len(c.completion) == 0 {
			continue
		}
		vals := make([]float64, 0, len(c.completion))
		for _, r := range sortedReps(c.completion) {
			vals = append(vals, c.completion[r])
		}
		groups = append(groups, figplot.BoxGroup{Category: loss(c.LossPct) + "%", Series: c.Transport, Box: stats.BoxTukey(vals), Bound: c.completionBound()})
	}
	if len(groups) == 0 {
		return nil
	}
	p := figplot.New("Completion time (pattern A): "+prof, "loss", "completion time T (s)")
	if err := figplot.AddBoxes(p, groups, boxSeries()); err != nil {
		return err
	}
	if err := save(p, Figure{Name: "completion-box-" + slug(fname), Title: "Completion time, " + prof,
		Caption: "Box: quartiles and median; whiskers: most extreme values within 1.5 IQR; points: outliers; triangles: lower bound (messages x one-way path delay). " + figplot.BoxNote}); err != nil {
		return err
	}
	// xi
	var pts plotter.XYs
	var ivs []figplot.Interval
	var reps plotter.XYs
	for _, x := range xi {
		if !inGroup[x.QUICCell] || !finite(x.OfMeans.Estimate) {
			continue
		}
		pts = append(pts, plotter.XY{X: x.LossPct, Y: x.OfMeans.Estimate})
		if finite(x.OfMeans.Lo) && finite(x.OfMeans.Hi) {
			ivs = append(ivs, figplot.Interval{X: x.LossPct, Lo: x.OfMeans.Lo, Hi: x.OfMeans.Hi})
		}
		for _, r := range x.perRep {
			reps = append(reps, plotter.XY{X: x.LossPct, Y: r})
		}
	}
	if len(pts) == 0 {
		return nil
	}
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].X < pts[j].X })
	p = figplot.New("Completion ratio xi = T_QUIC / T_TCP: "+prof, "loss (%)", "xi")
	lossTicks(p, losses(cs))
	if len(reps) > 0 {
		sc, err := plotter.NewScatter(reps)
		if err != nil {
			return err
		}
		sc.Color = color.RGBA{0x99, 0x99, 0x99, 0xff}
		sc.Shape = draw.RingGlyph{}
		sc.Radius = vg.Points(2)
		p.Add(sc)
		p.Legend.Add("per repetition", sc)
	}
	if err := figplot.AddLine(p, "of the means", pts, figplot.Orange(), nil, nil); err != nil {
		return err
	}
	p.Add(figplot.Intervals(ivs, figplot.Orange()))
	lo, hi := pts[0].X, pts[len(pts)-1].X
	if lo == hi {
		lo, hi = lo-0.5, hi+0.5
	}
	if err := figplot.AddLine(p, "xi = 1 (equal)", plotter.XYs{{X: lo, Y: 1}, {X: hi, Y: 1}}, figplot.Grey(), []vg.Length{vg.Points(4), vg.Points(3)}, draw.PlusGlyph{}); err != nil {
		return err
	}
	return save(p, Figure{Name: "xi-" + slug(fname), Title: "Completion ratio xi, " + prof,
		Caption: "xi of the means with its 95 % bootstrap confidence interval (bars), per-repetition ratios (rings); below 1 QUIC completes sooner."})
}

func (c *CellResult) completionBound() float64 {
	if !finite(c.DelayBoundMs) || len(c.completion) == 0 || c.Published == 0 {
		return math.NaN()
	}
	perRep := float64(c.Published) / float64(len(c.completion))
	return perRep * c.DelayBoundMs / 1000
}

func startupFigures(cs []*CellResult, fname, prof string, save func(*plot.Plot, Figure) error) error {
	var groups []figplot.BoxGroup
	for _, c := range cs {
		if len(c.startup) == 0 {
			continue
		}
		series := c.Transport
		if c.QUIC0RTT != "" && c.QUIC0RTT != string(records.EarlyHold) {
			series += ", broker 0-RTT " + c.QUIC0RTT // a box of its own, beside hold's
		}
		groups = append(groups, figplot.BoxGroup{Category: loss(c.LossPct) + "%", Series: series,
			Box: stats.BoxPercentile(c.startup, 5, 95), Bound: c.StartupBoundMs})
	}
	if len(groups) == 0 {
		return nil
	}
	p := figplot.New("Startup latency (pattern B): "+prof, "loss", "startup latency (ms)")
	if err := figplot.AddBoxes(p, groups, boxSeries()); err != nil {
		return err
	}
	return save(p, Figure{Name: "startup-box-" + slug(fname), Title: "Startup latency, " + prof,
		Caption: "Second connection's dial start to delivery at the subscriber (QUIC boxes without a policy named: the broker's default 0-RTT policy, hold). Box: quartiles and median; whiskers: 5th and 95th percentiles; points: values outside; triangles: physical lower bound (round trips the protocol needs before the PUBLISH x the publisher link's RTT + the message's one-way bound). " + figplot.BoxNote})
}

// variantFigures compares the variants of one profile at a single loss
// rate: mean delay, average publisher power and packets per second per
// variant and transport.
func variantFigures(cs []*CellResult, prof string, save func(*plot.Plot, Figure) error) error {
	q0 := minQoS(cs)
	var keep []*CellResult
	for _, c := range cs {
		if c.QoS == q0 {
			keep = append(keep, c)
		}
	}
	metrics := []struct {
		name, title, ylabel, caption string
		value                        func(*CellResult) float64
	}{
		{"delay-variants", "Mean one-way delay by variant", "mean one-way delay (ms)",
			"Mean one-way delay per payload size / interval and transport.", func(c *CellResult) float64 {
				if c.DelayMs.N == 0 {
					return math.NaN()
				}
				return c.DelayMs.Mean
			}},
		{"power-variants", "Average publisher device power by variant", "average device power (W)",
			"Estimated average power of the whole publishing device over its send window (base power + CPU time x active power + radio model; the testbed measured this with a meter on the board).", func(c *CellResult) float64 {
				if c.Energy == nil {
					return math.NaN()
				}
				return c.Energy.DeviceMeanW
			}},
		{"cpu-variants", "Publisher CPU time by variant", "CPU time (s)",
			"CPU time (user + system) of the publisher process, all repetitions; measured, no model.", func(c *CellResult) float64 { return c.CPUSeconds }},
		{"pps-variants", "Packets per second by variant", "packets per second (both directions)",
			"IP packets per second on the publisher's link, both directions.", func(c *CellResult) float64 { return c.PacketsPerSecond }},
	}
	groups, labels := splitVariants(keep, true)
	// what every variant shares goes into the title, once
	labels, common := splitCommonParts(labels)
	setting := fmt.Sprintf("QoS %d, loss %s%%", q0, loss(keep[0].LossPct))
	if common != "" {
		setting += ", " + common
	}
	trs := transports(keep)
	for _, m := range metrics {
		p := figplot.New(fmt.Sprintf("%s: %s (%s)", m.title, prof, setting), "variant", m.ylabel)
		series := make([]figplot.BarSeries, len(trs))
		for i, tr := range trs {
			series[i] = figplot.BarSeries{Name: transportLabel(tr), Color: transportColor(tr, trs), Values: nanValues(len(groups))}
			for j, g := range groups {
				for _, c := range g {
					if c.Transport == tr && finite(m.value(c)) {
						series[i].Values[j] = m.value(c)
					}
				}
			}
		}
		drawn, err := figplot.AddGroupedBars(p, labels, series, vg.Points(300), vg.Points(20))
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		if drawn == 0 {
			continue
		}
		p.X.Tick.Label.Rotation = 0.5
		p.X.Tick.Label.XAlign = draw.XRight
		if err := save(p, Figure{Name: m.name + "-" + slug(prof+"-"+experimentOf(keep)), Title: m.title + ", " + prof, Caption: m.caption}); err != nil {
			return err
		}
	}
	return nil
}

// splitCommonParts takes the comma-separated parts that every label has
// out of the labels; it returns the shortened labels and the common parts.
// A label left empty keeps its text.
func splitCommonParts(labels []string) ([]string, string) {
	if len(labels) < 2 {
		return labels, ""
	}
	split := func(l string) []string { return strings.Split(l, ", ") }
	var common []string
	for _, part := range split(labels[0]) {
		all := true
		for _, l := range labels[1:] {
			all = all && slices.Contains(split(l), part)
		}
		if all && !slices.Contains(common, part) {
			common = append(common, part)
		}
	}
	out := make([]string, len(labels))
	for i, l := range labels {
		var keep []string
		for _, part := range split(l) {
			if !slices.Contains(common, part) {
				keep = append(keep, part)
			}
		}
		out[i] = strings.Join(keep, ", ")
		if out[i] == "" {
			out[i] = l
		}
	}
	return out, strings.Join(common, ", ")
}

// delayCDF draws the empirical distribution function of the one-way delay
// of every cell of a group that keep selects: one line per transport and
// loss (darker for more loss). The x axis ends at the largest 99.9th
// percentile of the cells; the caption counts the values beyond it. The
// axis is logarithmic when the delays span more than figplot.LogAxisRatio, or
// always with forceLog (Options.LogCDF).
func delayCDF(cs []*CellResult, keep func(*CellResult) bool, name, prof, qlabel string, forceLog bool, save func(*plot.Plot, Figure) error) error {
	var sel []*CellResult
	for _, c := range cs {
		if keep(c) && len(c.delays) > 0 {
			sel = append(sel, c)
		}
	}
	if len(sel) == 0 {
		return nil
	}
	trs := transports(sel)
	ls := losses(sel)
	xmin, xmax := math.Inf(1), 0.0
	for _, c := range sel {
		v := append([]float64(nil), c.delays...)
		sort.Float64s(v)
		xmax = math.Max(xmax, v[int(math.Ceil(0.999*float64(len(v))))-1])
		xmin = math.Min(xmin, v[0])
	}
	p := figplot.New(fmt.Sprintf("Distribution of the one-way delay: %s (%s)", prof, qlabel), "one-way delay (ms)", "fraction of messages at or below")
	// delays over more than a factor figplot.LogAxisRatio (a 25 ms link whose
	// slowest cells take seconds): a log axis keeps the fast cells readable
	xOf := func(v float64) float64 { return v }
	logX := xmin > 0 && (forceLog || xmax/xmin > figplot.LogAxisRatio)
	if logX {
		xOf = math.Log10
		p.X.Label.Text = "one-way delay, log scale (ms)"
		p.X.Tick.Marker = figplot.LogTicks()
	}
	beyond := 0
	for _, tr := range trs {
		for li, l := range ls {
			for _, c := range sel {
				if c.Transport != tr || c.LossPct != l {
					continue
				}
				v := append([]float64(nil), c.delays...)
				sort.Float64s(v)
				n := len(v)
				step := max(1, n/400)
				// a step function from 0 at the fastest message
				xys := plotter.XYs{{X: xOf(v[0]), Y: 0}}
				for i := 0; i < n; i += step {
					if v[i] > xmax {
						break
					}
					xys = append(xys, plotter.XY{X: xOf(v[i]), Y: float64(i+1) / float64(n)})
				}
				if last := v[n-1]; last <= xmax {
					xys = append(xys, plotter.XY{X: xOf(last), Y: 1})
				}
				for _, d := range v {
					if d > xmax {
						beyond++
					}
				}
				if len(xys) < 2 {
					continue
				}
				line, err := plotter.NewLine(xys)
				if err != nil {
					return fmt.Errorf("cdf %s: %w", c.Cell, err)
				}
				line.StepStyle = plotter.PostStep
				line.Color = figplot.Shade(transportColor(tr, trs), li, len(ls))
				line.Width = vg.Points(1.5)
				if isQUIC(tr) {
					line.Dashes = []vg.Length{vg.Points(5), vg.Points(2)}
				}
				p.Add(line)
				p.Legend.Add(fmt.Sprintf("%s, %s%% loss", transportLabel(tr), loss(l)), line)
			}
		}
	}
	// from just below the fastest message: the physics (the link's delay)
	// sits at the left edge, the spread is what the axis shows
	p.X.Min, p.X.Max = math.Max(0, xmin-0.05*(xmax-xmin)), xmax+0.02*(xmax-xmin)
	if logX {
		lo, hi := math.Log10(xmin), math.Log10(xmax)
		p.X.Min, p.X.Max = lo-0.03*(hi-lo), hi+0.02*(hi-lo)
	}
	p.Y.Min, p.Y.Max = 0, 1
	note := ""
	if beyond > 0 {
		note = fmt.Sprintf(" The axis ends at the largest 99.9th percentile of the cells (%.1f ms); %d values lie beyond it.", xmax, beyond)
	}
	return save(p, Figure{Name: "delay-cdf-" + name, Title: "Delay distribution (CDF), " + prof,
		Caption: "Fraction of messages delivered within a given one-way delay, per transport (" + qlabel + ", QUIC dashed) and loss rate (darker: more loss)." + note})
}

// directionName names an impairment direction for a legend.
func directionName(d string) string {
	switch d {
	case records.DirectionEgress:
		return "publisher egress only"
	case records.DirectionIngress:
		return "towards the publisher only"
	}
	return "both directions"
}

// directionFigure compares the mean one-way delay of cells that differ
// only in the impairment direction of the publisher's link (E1-E3's
// testbed setting against the symmetric variant): one line per transport
// and direction. It draws nothing unless there are two directions and no
// other variant.
func directionFigure(cs []*CellResult, prof string, save func(*plot.Plot, Figure) error) error {
	q0 := minQoS(cs)
	dirs := map[string]bool{}
	others := map[string]bool{}
	for _, c := range cs {
		if c.QoS != q0 || c.DelayMs.N == 0 {
			continue
		}
		dirs[c.Link.PubDirection] = true
		others[fmt.Sprintf("%s|%dB|%d|n%d|r%d|%d|%g", c.Pattern, c.Size, c.IntervalNs, c.Publishers, c.Retries, c.Link.SubDelayNs, c.Link.SubRateBps)] = true
	}
	if len(dirs) < 2 || len(others) != 1 {
		return nil
	}
	var ds []string
	for d := range dirs {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return directionName(ds[i]) > directionName(ds[j]) }) // egress first
	qlabel := "QoS " + strconv.Itoa(q0)
	p := figplot.New(fmt.Sprintf("Mean one-way delay by impairment direction: %s (%s)", prof, qlabel), "loss (%)", "mean one-way delay (ms)")
	lossTicks(p, losses(cs))
	trs := transports(cs)
	for di, d := range ds {
		var dashes []vg.Length
		var glyph draw.GlyphDrawer = draw.CircleGlyph{}
		if di > 0 {
			dashes, glyph = []vg.Length{vg.Points(6), vg.Points(3)}, draw.SquareGlyph{}
		}
		for _, tr := range trs {
			var xys plotter.XYs
			for _, c := range cs {
				if c.QoS == q0 && c.Transport == tr && c.Link.PubDirection == d && c.DelayMs.N > 0 && finite(c.DelayMs.Mean) {
					xys = append(xys, plotter.XY{X: c.LossPct, Y: c.DelayMs.Mean})
				}
			}
			sort.SliceStable(xys, func(i, j int) bool { return xys[i].X < xys[j].X })
			if err := figplot.AddLine(p, transportLabel(tr)+", "+directionName(d), xys, transportColor(tr, trs), dashes, glyph); err != nil {
				return err
			}
		}
	}
	return save(p, Figure{Name: "delay-direction-" + slug(prof+"-"+experimentOf(cs)), Title: "Delay by impairment direction, " + prof,
		Caption: "Mean one-way delay per transport (" + qlabel + ") with the publisher's link impaired on its egress only (the testbed's traffic control; solid) and in both directions (dashed): the return path carries the acknowledgements, so where the lines part the return path's delay and loss matter."})
}
