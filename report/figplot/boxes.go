package figplot

import (
	"fmt"
	"image/color"
	"math"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/iotq/iotq/internal/stats"
)

// LogAxisRatio: box plots whose whiskers (and lower bounds) span more than
// this factor get a logarithmic y axis; callers use it for other
// distributions too, so that all figures switch at the same spread.
const LogAxisRatio = 20

// BoxNote explains, for a caption, how AddBoxes treats far outliers and
// when its axis is logarithmic.
const BoxNote = "Outliers farther than one whisker span beyond a whisker are left off the axis and counted (+n at the top or bottom edge); the y axis is logarithmic when the whiskers span more than a factor of 20."

// countRoom is the part of the y axis added at an edge where boxes count
// clipped outliers, so that the counts do not sit on the data.
const countRoom = 0.08

// BoxGroup is one box of a box plot: its category on the x axis, its
// series (boxes of several series stand side by side in a category), the
// statistics it draws and a lower bound marked beside it (NaN: none).
type BoxGroup struct {
	Category, Series string
	Box              stats.Box
	Bound            float64
}

// Series says how AddBoxes tells the series of a box plot apart.
type Series struct {
	// Less orders the series side by side within a category.
	Less func(a, b string) bool
	// Color gives series s its colour among all series of the plot (in
	// the order of Less).
	Color func(s string, all []string) color.Color
	// Label names series s in the legend.
	Label func(s string) string
}

// AddBoxes lays the boxes out by category (in order of appearance), side
// by side per series, with a lower-bound marker per box; boxes of very
// different sizes (LogAxisRatio) get a log10 y axis labelled in original
// units, and " (" in the y label becomes ", log scale (".
func AddBoxes(p *plot.Plot, groups []BoxGroup, series Series) error {
	// boxes of very different sizes: a log axis keeps the small ones boxes
	lo, hi := math.Inf(1), 0.0
	for _, g := range groups {
		if finite(g.Box.Q1) {
			lo, hi = math.Min(lo, g.Box.Low), math.Max(hi, g.Box.High)
		}
		if finite(g.Bound) && g.Bound > 0 {
			lo = math.Min(lo, g.Bound)
		}
	}
	if lo > 0 && hi/lo > LogAxisRatio {
		groups = logBoxes(groups)
		p.Y.Tick.Marker = LogTicks()
		p.Y.Label.Text = strings.Replace(p.Y.Label.Text, " (", ", log scale (", 1)
	}
	var cats []string
	catIdx := map[string]int{}
	var trs []string
	trSeen := map[string]bool{}
	for _, g := range groups {
		if _, ok := catIdx[g.Category]; !ok {
			catIdx[g.Category] = len(cats)
			cats = append(cats, g.Category)
		}
		if !trSeen[g.Series] {
			trSeen[g.Series] = true
			trs = append(trs, g.Series)
		}
	}
	sort.SliceStable(trs, func(i, j int) bool { return series.Less(trs[i], trs[j]) })
	trIdx := map[string]int{}
	for i, t := range trs {
		trIdx[t] = i
	}
	width := 0.7 / float64(len(trs))
	legend := map[string]bool{}
	var bounds plotter.XYs
	for _, g := range groups {
		x := float64(catIdx[g.Category]) + (float64(trIdx[g.Series])-float64(len(trs)-1)/2)*width
		b := &boxes{x: x, width: width * 0.8, b: g.Box, col: series.Color(g.Series, trs)}
		p.Add(b)
		if !legend[g.Series] {
			legend[g.Series] = true
			p.Legend.Add(series.Label(g.Series), b)
		}
		if finite(g.Bound) {
			bounds = append(bounds, plotter.XY{X: x, Y: g.Bound})
		}
	}
	if len(bounds) > 0 {
		sc, err := plotter.NewScatter(bounds)
		if err != nil {
			return err
		}
		sc.Shape = draw.TriangleGlyph{}
		sc.Color = Grey()
		sc.Radius = vg.Points(3)
		p.Add(sc)
		p.Legend.Add("physical lower bound", sc)
	}
	// room for the counts of clipped outliers at an edge, clear of the
	// points drawn next to it
	clipAbove, clipBelow := false, false
	for _, g := range groups {
		for _, o := range g.Box.Outliers {
			clipAbove = clipAbove || o > p.Y.Max
			clipBelow = clipBelow || o < p.Y.Min
		}
	}
	if span := p.Y.Max - p.Y.Min; span > 0 {
		if clipAbove {
			p.Y.Max += countRoom * span
		}
		if clipBelow {
			p.Y.Min -= countRoom * span
		}
	}
	p.NominalX(cats...)
	p.X.Min, p.X.Max = -0.6, float64(len(cats))-0.4
	return nil
}

// logBoxes returns the groups with every value replaced by its decimal
// logarithm (the plot then runs on a linear axis with LogTicks).
func logBoxes(groups []BoxGroup) []BoxGroup {
	lg := func(v float64) float64 {
		if v <= 0 {
			return math.NaN()
		}
		return math.Log10(v)
	}
	out := make([]BoxGroup, len(groups))
	for i, g := range groups {
		b := g.Box
		b.Q1, b.Median, b.Q3, b.Low, b.High = lg(b.Q1), lg(b.Median), lg(b.Q3), lg(b.Low), lg(b.High)
		b.Outliers = make([]float64, 0, len(g.Box.Outliers))
		for _, o := range g.Box.Outliers {
			if o > 0 {
				b.Outliers = append(b.Outliers, math.Log10(o))
			}
		}
		g.Box, g.Bound = b, lg(g.Bound)
		out[i] = g
	}
	return out
}

// boxes draws one box from precomputed statistics; its x and width are in
// data units.
type boxes struct {
	x, width float64
	b        stats.Box
	col      color.Color
}

func (bx *boxes) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	if !finite(bx.b.Q1) {
		return
	}
	x0, x1, xm := trX(bx.x-bx.width/2), trX(bx.x+bx.width/2), trX(bx.x)
	q1, q3, med := trY(bx.b.Q1), trY(bx.b.Q3), trY(bx.b.Median)
	lo, hi := trY(bx.b.Low), trY(bx.b.High)
	fill := translucent(bx.col)
	poly := []vg.Point{{X: x0, Y: q1}, {X: x0, Y: q3}, {X: x1, Y: q3}, {X: x1, Y: q1}}
	c.FillPolygon(fill, c.ClipPolygonY(poly))
	ls := draw.LineStyle{Color: bx.col, Width: vg.Points(1)}
	c.StrokeLines(ls, c.ClipLinesY(append(poly, vg.Point{X: x0, Y: q1}))...)
	c.StrokeLines(draw.LineStyle{Color: bx.col, Width: vg.Points(2)}, c.ClipLinesY([]vg.Point{{X: x0, Y: med}, {X: x1, Y: med}})...)
	capW := (x1 - x0) / 4
	c.StrokeLines(ls, c.ClipLinesY(
		[]vg.Point{{X: xm, Y: q3}, {X: xm, Y: hi}}, []vg.Point{{X: xm - capW, Y: hi}, {X: xm + capW, Y: hi}},
		[]vg.Point{{X: xm, Y: q1}, {X: xm, Y: lo}}, []vg.Point{{X: xm - capW, Y: lo}, {X: xm + capW, Y: lo}})...)
	gs := draw.GlyphStyle{Color: bx.col, Radius: vg.Points(2), Shape: draw.CircleGlyph{}}
	above, below := 0, 0
	ys := make([]vg.Length, 0, len(bx.b.Outliers))
	for _, o := range bx.b.Outliers {
		y := trY(o)
		switch {
		case y > c.Max.Y:
			above++
		case y < c.Min.Y:
			below++
		default:
			ys = append(ys, y)
		}
	}
	for _, y := range distinctMarks(ys) {
		c.DrawGlyphNoClip(gs, vg.Point{X: xm, Y: y})
	}
	// outliers beyond the axis are counted at its edge, so they do not
	// squeeze the boxes into a line
	sty := plt.Y.Tick.Label
	sty.Font.Size = vg.Points(9)
	sty.Color = bx.col
	sty.XAlign = draw.XCenter
	if above > 0 {
		sty.YAlign = draw.YTop
		c.FillText(sty, vg.Point{X: xm, Y: c.Max.Y - vg.Points(1)}, fmt.Sprintf("+%d", above))
	}
	if below > 0 {
		sty.YAlign = draw.YBottom
		c.FillText(sty, vg.Point{X: xm, Y: c.Min.Y + vg.Points(1)}, fmt.Sprintf("+%d", below))
	}
}

// markGap is the distance below which two outlier marks of one box draw
// as one: a glyph of radius 2 pt moved by less than this looks the same,
// and a box of a campaign's pooled messages can have thousands of outliers
// (one SVG element each made figures of over a megabyte).
const markGap = vg.Length(0.5)

// distinctMarks sorts ys and keeps each position at least markGap above the
// last kept one.
func distinctMarks(ys []vg.Length) []vg.Length {
	sort.Slice(ys, func(i, j int) bool { return ys[i] < ys[j] })
	out := ys[:0]
	for _, y := range ys {
		if len(out) == 0 || y-out[len(out)-1] >= markGap {
			out = append(out, y)
		}
	}
	return out
}

// DataRange spans the whiskers, the lower bound and the outliers within
// one whisker span of them; farther outliers are counted, not scaled to.
func (bx *boxes) DataRange() (xmin, xmax, ymin, ymax float64) {
	ymin, ymax = bx.b.Low, bx.b.High
	span := bx.b.High - bx.b.Low
	if !finite(span) || span <= 0 {
		span = math.Max(math.Abs(bx.b.High), 1e-9)
	}
	for _, o := range bx.b.Outliers {
		if o >= bx.b.Low-span && o <= bx.b.High+span {
			ymin, ymax = math.Min(ymin, o), math.Max(ymax, o)
		}
	}
	if !finite(ymin) {
		ymin, ymax = 0, 0
	}
	return bx.x - bx.width/2, bx.x + bx.width/2, ymin, ymax
}

// Thumbnail draws the legend entry.
func (bx *boxes) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Min.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Min.Y}}
	c.FillPolygon(translucent(bx.col), pts)
	c.StrokeLines(draw.LineStyle{Color: bx.col, Width: vg.Points(1)}, append(pts, pts[0]))
}
