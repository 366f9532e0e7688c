// Figures of one-way delay: by loss, its spread, its distribution, and by
// impairment direction.

package report

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/iotq/iotq/internal/stats"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/report/figplot"
)

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
