package figplot

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// BarSeries is one series of a grouped bar chart: a value per category
// (NaN: no bar).
type BarSeries struct {
	Name   string
	Color  color.Color
	Values []float64
}

// AddGroupedBars draws series side by side within each category of a
// nominal x axis: the bars share width (divided among them all), each
// at most maxWidth. It
// returns how many bars it drew (finite values); with none the plot is
// left without a legend entry worth drawing, and callers skip it.
func AddGroupedBars(p *plot.Plot, categories []string, series []BarSeries, width, maxWidth vg.Length) (int, error) {
	n := max(1, len(categories)*len(series))
	w := min(width/vg.Length(n), maxWidth)
	drawn := 0
	for i, s := range series {
		if len(s.Values) != len(categories) {
			return 0, fmt.Errorf("bars %q: %d values for %d categories", s.Name, len(s.Values), len(categories))
		}
		vals := make(plotter.Values, len(s.Values))
		for j, v := range s.Values {
			if finite(v) {
				vals[j] = v
				drawn++
			}
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return 0, fmt.Errorf("bars %q: %w", s.Name, err)
		}
		b.Color = s.Color
		b.LineStyle.Width = 0
		b.Offset = vg.Length(float64(i)-float64(len(series)-1)/2) * w
		p.Add(b)
		p.Legend.Add(s.Name, b)
	}
	p.NominalX(categories...)
	p.X.Min, p.X.Max = -0.6, float64(len(categories))-0.4
	return drawn, nil
}
