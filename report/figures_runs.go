// Figures of stop-and-wait completion time and resumed start-up latency.

package report

import (
	"image/color"
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/iotq/iotq/internal/stats"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/report/figplot"
)

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
