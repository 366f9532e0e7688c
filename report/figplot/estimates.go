package figplot

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Estimate is one point of an estimates chart: an estimate with its
// interval (Lo, Hi; not finite: no bar) in category Cat.
type Estimate struct {
	Cat         int
	Est, Lo, Hi float64
}

// EstimateSeries is one series of an estimates chart (a transport).
type EstimateSeries struct {
	Name   string
	Color  color.Color
	Points []Estimate
}

// AddEstimates draws each series' estimates as points with their
// intervals as error bars, the series side by side within each category
// of a nominal x axis, and sets that axis. It returns how many points it
// drew (finite estimates); with none the caller skips the figure.
func AddEstimates(p *plot.Plot, categories []string, series []EstimateSeries) (int, error) {
	drawn := 0
	for i, s := range series {
		var pts plotter.XYs
		var errs plotter.YErrors
		for _, e := range s.Points {
			if !finite(e.Est) {
				continue
			}
			lo, hi := e.Lo, e.Hi
			if !finite(lo) || !finite(hi) {
				lo, hi = e.Est, e.Est // one repetition: no interval
			}
			pts = append(pts, plotter.XY{X: float64(e.Cat) + 0.15*(float64(i)-float64(len(series)-1)/2), Y: e.Est})
			errs = append(errs, struct{ Low, High float64 }{e.Est - lo, hi - e.Est})
		}
		if len(pts) == 0 {
			continue
		}
		drawn += len(pts)
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return 0, fmt.Errorf("estimates %q: %w", s.Name, err)
		}
		sc.Color = s.Color
		sc.Radius = vg.Points(3)
		eb, err := plotter.NewYErrorBars(struct {
			plotter.XYer
			plotter.YErrorer
		}{pts, errs})
		if err != nil {
			return 0, fmt.Errorf("estimates %q: %w", s.Name, err)
		}
		eb.Color = s.Color
		p.Add(sc, eb)
		p.Legend.Add(s.Name, sc)
	}
	p.NominalX(categories...)
	p.X.Min, p.X.Max = -0.6, float64(len(categories))-0.4
	return drawn, nil
}
