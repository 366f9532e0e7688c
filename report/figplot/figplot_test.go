package figplot

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/iotq/iotq/internal/stats"
)

// TestBoxesKeepFarOutliersOffTheAxis: an outlier 100 times the whiskers
// does not set the axis (it is counted instead), a near one does.
func TestBoxesKeepFarOutliersOffTheAxis(t *testing.T) {
	bx := &boxes{x: 0, width: 1, b: stats.Box{Q1: 10, Median: 11, Q3: 12, Low: 9, High: 14, Outliers: []float64{15, 1400}}}
	_, _, lo, hi := bx.DataRange()
	if lo != 9 || hi != 15 {
		t.Fatalf("range %v..%v, want 9..15", lo, hi)
	}
}

// plain is a Series for tests: by name, Blue then Other, named as given.
func plain() Series {
	return Series{
		Less: func(a, b string) bool { return a < b },
		Color: func(s string, all []string) color.Color {
			for i, o := range all {
				if o == s && i > 0 {
					return Other(i - 1)
				}
			}
			return Blue()
		},
		Label: func(s string) string { return s },
	}
}

// TestLogAxisForBoxesOfVeryDifferentSize: boxes more than LogAxisRatio
// apart get a log10 axis and say so in the label; similar ones do not.
func TestLogAxisForBoxesOfVeryDifferentSize(t *testing.T) {
	p := New("t", "loss", "startup latency (ms)")
	small := stats.Box{Q1: 10, Median: 11, Q3: 12, Low: 9, High: 13}
	big := stats.Box{Q1: 100, Median: 500, Q3: 900, Low: 90, High: 1000}
	if err := AddBoxes(p, []BoxGroup{{Category: "0%", Series: "quic", Box: small, Bound: math.NaN()}, {Category: "5%", Series: "quic", Box: big, Bound: math.NaN()}}, plain()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Y.Label.Text, "log scale") || p.Y.Max > 3.1 || p.Y.Min < 0.9 {
		t.Fatalf("label %q, y %v..%v: want a log10 axis", p.Y.Label.Text, p.Y.Min, p.Y.Max)
	}
	q := New("t", "loss", "delay (ms)")
	if err := AddBoxes(q, []BoxGroup{{Category: "0%", Series: "quic", Box: small}}, plain()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(q.Y.Label.Text, "log") {
		t.Fatal("similar boxes need no log axis")
	}
	if !strings.Contains(BoxNote, fmt.Sprintf("factor of %d", LogAxisRatio)) {
		t.Fatalf("BoxNote does not name LogAxisRatio (%d): %q", LogAxisRatio, BoxNote)
	}
}

// TestLogTicksLabelTheAxis: a log axis is labelled within its range, in
// plain numbers, also when it spans less than one 1-2-5 step.
func TestLogTicksLabelTheAxis(t *testing.T) {
	label := func(lo, hi float64) []string {
		var out []string
		for _, tk := range LogTicks().Ticks(math.Log10(lo), math.Log10(hi)) {
			out = append(out, tk.Label)
		}
		return out
	}
	if got := strings.Join(label(22, 12000), " "); got != "50 100 200 500 1000 2000 5000 10000" {
		t.Errorf("22..12000: %s", got)
	}
	if got := strings.Join(label(22, 600), " "); got != "30 50 100 200 300 500" {
		t.Errorf("22..600: %s", got)
	}
	if got := label(25, 28); len(got) != 2 || got[0] != "25" || got[1] != "28" {
		t.Errorf("25..28: %q", got)
	}
	if got := strings.Join(label(0.01, 0.5), " "); got != "0.01 0.02 0.03 0.05 0.1 0.2 0.3 0.5" {
		t.Errorf("0.01..0.5: %s", got)
	}
}

// TestShadeRunsLightToDark: the first step is lighter than the colour,
// the last darker, one step keeps it.
func TestShadeRunsLightToDark(t *testing.T) {
	sum := func(c color.Color) uint32 { r, g, b, _ := c.RGBA(); return r + g + b }
	base := Orange()
	if sum(Shade(base, 0, 3)) <= sum(base) || sum(Shade(base, 2, 3)) >= sum(base) {
		t.Errorf("shades %v, %v around %v: want lighter, then darker", Shade(base, 0, 3), Shade(base, 2, 3), base)
	}
	if r, g, b, a := Shade(base, 0, 1).RGBA(); [4]uint32{r, g, b, a} != func() [4]uint32 { r, g, b, a := base.RGBA(); return [4]uint32{r, g, b, a} }() {
		t.Errorf("one step changed the colour: %v", Shade(base, 0, 1))
	}
}

// TestIntervalsRange: the data range spans every interval; none spans a
// unit range, so that an empty plot still has an axis.
func TestIntervalsRange(t *testing.T) {
	type ranger interface {
		DataRange() (xmin, xmax, ymin, ymax float64)
	}
	r := Intervals([]Interval{{X: 1, Lo: 0.8, Hi: 1.3}, {X: 5, Lo: 0.5, Hi: 1.1}}, Orange()).(ranger)
	if x0, x1, y0, y1 := r.DataRange(); x0 != 1 || x1 != 5 || y0 != 0.5 || y1 != 1.3 {
		t.Errorf("range x %v..%v y %v..%v, want 1..5, 0.5..1.3", x0, x1, y0, y1)
	}
	if _, _, y0, y1 := Intervals(nil, Orange()).(ranger).DataRange(); y0 != 1 || y1 != 1 {
		t.Errorf("empty: y %v..%v", y0, y1)
	}
}

// TestRenderWritesSVGAndPNG: Render writes both files, names Times-
// compatible fonts in the SVG and wraps a long title over several lines.
func TestRenderWritesSVGAndPNG(t *testing.T) {
	dir := t.TempDir()
	title := strings.Repeat("a long title of many words ", 8)
	p := New(title, "x", "y")
	if err := AddLine(p, "line", plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 2}}, Blue(), nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := Render(p, dir, "f"); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "f.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(svg), svgFonts) || strings.Contains(string(svg), "font-family:Liberation Serif;") {
		t.Error("the SVG names the bare Liberation Serif, not the font list")
	}
	if n := strings.Count(p.Title.Text, "\n"); n < 1 {
		t.Errorf("title not wrapped: %q", p.Title.Text)
	}
	if fi, err := os.Stat(filepath.Join(dir, "f.png")); err != nil || fi.Size() == 0 {
		t.Errorf("no PNG: %v", err)
	}
	if err := Render(New("t", "x", "y"), filepath.Join(dir, "missing"), "f"); err == nil || !strings.Contains(err.Error(), "f.svg") {
		t.Errorf("render into a missing directory: %v, want an error naming f.svg", err)
	}
}

func TestGroupedBarsCountAndCheckTheirValues(t *testing.T) {
	p := New("t", "x", "y")
	drawn, err := AddGroupedBars(p, []string{"a", "b"}, []BarSeries{
		{Name: "one", Color: Blue(), Values: []float64{1, math.NaN()}},
		{Name: "two", Color: Orange(), Values: []float64{2, 3}},
	}, vg.Points(200), vg.Points(24))
	if err != nil || drawn != 3 {
		t.Fatalf("drawn %d, %v; want 3 bars (NaN draws none)", drawn, err)
	}
	if p.X.Min != -0.6 || p.X.Max != 1.6 {
		t.Errorf("x range %v..%v, want the two categories with margins", p.X.Min, p.X.Max)
	}
	if _, err := AddGroupedBars(New("t", "x", "y"), []string{"a", "b"}, []BarSeries{{Name: "short", Values: []float64{1}}}, vg.Points(200), vg.Points(24)); err == nil {
		t.Error("a series with fewer values than categories was accepted")
	}
}

// TestOutlierMarksDrawOncePerPosition: marks closer than markGap draw as
// one, marks farther apart each draw, and a box with thousands of outliers
// on a few positions writes a small SVG.
func TestOutlierMarksDrawOncePerPosition(t *testing.T) {
	got := distinctMarks([]vg.Length{10.6, 10, 10.3, 20, 10.7})
	want := []vg.Length{10, 10.6, 20}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("distinct marks %v, want %v", got, want)
	}
	render := func(n int) int64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = 15 + float64(i%7)*0.5 // 7 positions inside the axis
		}
		p := New("boxes", "x", "y")
		box := stats.Box{Q1: 10, Median: 11, Q3: 12, Low: 9, High: 14, Outliers: out}
		if err := AddBoxes(p, []BoxGroup{{Category: "5%", Series: "quic", Box: box, Bound: math.NaN()}}, plain()); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := Render(p, dir, "b"); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(dir, "b.svg"))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	few, many := render(7), render(20000)
	if many != few {
		t.Errorf("SVG with 20000 outliers on 7 positions: %d bytes, with 7 outliers: %d; want the same", many, few)
	}
}
