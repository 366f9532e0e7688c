package report

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot"

	"github.com/iotq/iotq/internal/stats"
	"github.com/iotq/iotq/records"
)

// TestFiguresForReaders: every PNG is at least minPNGWidth pixels wide,
// the legend sits in a column of its own right of the plotting area,
// each delay group has a CDF, and no table is printed empty.
func TestFiguresForReaders(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "results")
	os.MkdirAll(dir, 0o755)
	writeFixture(t, dir)
	s, out := generate(t, dir, Options{})
	cdfs := 0
	for _, f := range s.Figures {
		if strings.HasPrefix(f.Name, "delay-cdf-") {
			cdfs++
		}
		r, err := os.Open(filepath.Join(out, DirFigures, f.Name+".png"))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(r)
		r.Close()
		if err != nil {
			t.Fatalf("%s.png: %v", f.Name, err)
		}
		b := img.Bounds()
		if b.Dx() < minPNGWidth {
			t.Errorf("%s.png is %d px wide, want at least %d", f.Name, b.Dx(), minPNGWidth)
		}
		// The legend has a column of its own: somewhere in the right third
		// a column of background (between the plot's frame, whose grid
		// lines run to its edge, and the legend) with legend ink right of it.
		blank := func(x int) bool {
			for y := b.Min.Y; y < b.Max.Y; y++ {
				if r, g, bl, _ := img.At(x, y).RGBA(); r < 0xc000 || g < 0xc000 || bl < 0xc000 {
					return false
				}
			}
			return true
		}
		gap := -1
		for x := b.Min.X + b.Dx()*2/3; x < b.Max.X-40; x++ {
			if blank(x) {
				gap = x
				break
			}
		}
		inkRight := false
		for x := gap + 1; gap >= 0 && x < b.Max.X && !inkRight; x++ {
			inkRight = !blank(x)
		}
		if !inkRight {
			t.Errorf("%s.png: no legend column right of the plotting area", f.Name)
		}
	}
	if cdfs == 0 {
		t.Error("no delay CDF figure")
	}
	md, _ := os.ReadFile(filepath.Join(out, FileMarkdown))
	h, _ := os.ReadFile(filepath.Join(out, FileHTML))
	if strings.Contains(string(md), "(no data)") || strings.Contains(string(h), "(no data)") {
		t.Error("the report prints an empty section")
	}
}

// TestBoxesKeepFarOutliersOffTheAxis: an outlier 100 times the whiskers
// does not set the axis (it is counted instead), a near one does.
func TestBoxesKeepFarOutliersOffTheAxis(t *testing.T) {
	bx := &boxes{x: 0, width: 1, b: stats.Box{Q1: 10, Median: 11, Q3: 12, Low: 9, High: 14, Outliers: []float64{15, 1400}}}
	_, _, lo, hi := bx.DataRange()
	if lo != 9 || hi != 15 {
		t.Fatalf("range %v..%v, want 9..15", lo, hi)
	}
}

func TestLogAxisForBoxesOfVeryDifferentSize(t *testing.T) {
	p := newPlot("t", "loss", "startup latency (ms)")
	small := stats.Box{Q1: 10, Median: 11, Q3: 12, Low: 9, High: 13}
	big := stats.Box{Q1: 100, Median: 500, Q3: 900, Low: 90, High: 1000}
	if err := addBoxes(p, []boxGroup{{label: "0%", transport: "quic", box: small}, {label: "5%", transport: "quic", box: big}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Y.Label.Text, "log scale") || p.Y.Max > 3.1 || p.Y.Min < 0.9 {
		t.Fatalf("label %q, y %v..%v: want a log10 axis", p.Y.Label.Text, p.Y.Min, p.Y.Max)
	}
	q := newPlot("t", "loss", "delay (ms)")
	if err := addBoxes(q, []boxGroup{{label: "0%", transport: "quic", box: small}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(q.Y.Label.Text, "log") {
		t.Fatal("similar boxes need no log axis")
	}
}

// TestDirectionFigure: cells that differ only in the impairment direction
// get one figure with both settings; a single direction gets none.
func TestDirectionFigure(t *testing.T) {
	var cs []*CellResult
	for _, dir := range []string{records.DirectionEgress, ""} {
		for _, tr := range []string{"mqtts", "quic"} {
			for _, l := range []float64{0, 5} {
				c := &CellResult{Cell: tr + dir, Experiment: "E1", Profile: "cellular", Transport: tr, LossPct: l, Size: 100, IntervalNs: 1e9,
					Link: Link{PubDelayNs: 100e6, PubDirection: dir}}
				c.DelayMs = stats.Summarize([]float64{100 + l, 102 + l})
				cs = append(cs, c)
			}
		}
	}
	var got []Figure
	save := func(p *plot.Plot, f Figure) error { got = append(got, f); return nil }
	if err := directionFigure(cs, "cellular", save); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "delay-direction-cellular-E1" {
		t.Fatalf("figures %+v", got)
	}
	got = nil
	if err := directionFigure(cs[:4], "cellular", save); err != nil || len(got) != 0 {
		t.Fatalf("one direction drew %+v (%v)", got, err)
	}
}
