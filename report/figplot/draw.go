package figplot

import (
	"fmt"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The colours are functions, not variables, so that no caller can change
// them for everyone.

// Blue is the colour of a figure's first series (the report's TCP).
func Blue() color.Color { return color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff} }

// Orange is the colour of a figure's second series (the report's QUIC).
func Orange() color.Color { return color.RGBA{R: 0xd6, G: 0x5f, B: 0x00, A: 0xff} }

// Grey is the colour of reference lines and markers (lower bounds, xi = 1).
func Grey() color.Color { return color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff} }

// Other returns the colour of the n-th further series (from 0), cycling
// through four colours apart from Blue and Orange.
func Other(n int) color.Color {
	palette := [...]color.RGBA{{0x2c, 0xa0, 0x2c, 0xff}, {0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff}}
	return palette[n%len(palette)]
}

// Shade darkens col for the i-th of n steps (i = 0 is the lightest): from
// 40 % towards white to 40 % towards black; one step keeps col.
func Shade(col color.Color, i, n int) color.Color {
	c := color.NRGBAModel.Convert(col).(color.NRGBA)
	if n <= 1 {
		return c
	}
	f := -0.4 + 0.8*float64(i)/float64(n-1)
	mix := func(v uint8) uint8 {
		if f < 0 {
			return uint8(float64(v) + (255-float64(v))*(-f))
		}
		return uint8(float64(v) * (1 - f))
	}
	return color.NRGBA{R: mix(c.R), G: mix(c.G), B: mix(c.B), A: 0xff}
}

// translucent returns col at one third opacity.
func translucent(col color.Color) color.Color {
	n := color.NRGBAModel.Convert(col).(color.NRGBA)
	n.A = 0x55
	return n
}

// New returns a plot with a title, axis labels and a grid, its legend at
// the top left (Render moves it into a column of its own).
func New(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.Padding = vg.Points(10) // clear of the frame and the top tick label
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

// AddLine adds a line with points at xys to p and to its legend as name,
// in col, dashed by dashes (nil: solid), with glyph at the points (nil: a
// ring). No points draw nothing.
func AddLine(p *plot.Plot, name string, xys plotter.XYs, col color.Color, dashes []vg.Length, glyph draw.GlyphDrawer) error {
	if len(xys) == 0 {
		return nil
	}
	l, pts, err := plotter.NewLinePoints(xys)
	if err != nil {
		return fmt.Errorf("line %s: %w", name, err)
	}
	l.Color = col
	l.Width = vg.Points(1.5)
	l.Dashes = dashes
	pts.Color = col
	if glyph != nil {
		pts.Shape = glyph
	}
	pts.Radius = vg.Points(3)
	p.Add(l, pts)
	p.Legend.Add(name, l, pts)
	return nil
}

// LogTicks labels a log10-transformed axis at 1, 2 and 5 times the powers
// of ten within the axis (also 3 on an axis of two decades or less), in
// original units; an axis shorter than one step is labelled at its ends.
func LogTicks() plot.Ticker {
	return plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		ms := []float64{1, 2, 5}
		if hi-lo <= 2 {
			ms = []float64{1, 2, 3, 5}
		}
		var ticks []plot.Tick
		for e := math.Floor(lo); e <= math.Ceil(hi); e++ {
			for _, m := range ms {
				v := m * math.Pow(10, e)
				if lv := math.Log10(v); lv >= lo && lv <= hi {
					ticks = append(ticks, plot.Tick{Value: lv, Label: logLabel(v)})
				}
			}
		}
		if len(ticks) < 2 { // less than one step: label the ends
			ticks = []plot.Tick{
				{Value: lo, Label: logLabel(math.Pow(10, lo))},
				{Value: hi, Label: logLabel(math.Pow(10, hi))},
			}
		}
		return ticks
	})
}

// logLabel writes a tick value of a log axis: whole numbers from 1 up,
// three significant digits below.
func logLabel(v float64) string {
	if v >= 1 {
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// Interval is a vertical confidence interval from Lo to Hi at X.
type Interval struct{ X, Lo, Hi float64 }

// Intervals returns a plotter that draws ivs as capped vertical bars in
// col; its data range spans them.
func Intervals(ivs []Interval, col color.Color) plot.Plotter {
	return &intervals{ivs: ivs, col: col}
}

type intervals struct {
	ivs []Interval
	col color.Color
}

func (iv *intervals) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	ls := draw.LineStyle{Color: iv.col, Width: vg.Points(1)}
	for _, i := range iv.ivs {
		x, lo, hi := trX(i.X), trY(i.Lo), trY(i.Hi)
		capW := vg.Points(4)
		c.StrokeLines(ls, c.ClipLinesY([]vg.Point{{X: x, Y: lo}, {X: x, Y: hi}},
			[]vg.Point{{X: x - capW, Y: lo}, {X: x + capW, Y: lo}}, []vg.Point{{X: x - capW, Y: hi}, {X: x + capW, Y: hi}})...)
	}
}

func (iv *intervals) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, ymin = math.Inf(1), math.Inf(1)
	xmax, ymax = math.Inf(-1), math.Inf(-1)
	for _, i := range iv.ivs {
		xmin, xmax = math.Min(xmin, i.X), math.Max(xmax, i.X)
		ymin, ymax = math.Min(ymin, i.Lo), math.Max(ymax, i.Hi)
	}
	if len(iv.ivs) == 0 {
		return 0, 0, 1, 1
	}
	return
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
