package figplot

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

const (
	// PlotWidth is the width of a figure's plotting area (its canvas,
	// margin included); the legend gets a column of its own to the right,
	// so it never covers data.
	PlotWidth = 16 * vg.Centimeter
	// plotHeight is the figure's height unless its legend needs more.
	plotHeight = 10 * vg.Centimeter
	// MinPNGWidth is the least width of a PNG in pixels, readable on a
	// screen without zooming.
	MinPNGWidth = 1200
)

// TextSlack is how much wider than Liberation Serif (the font the
// layout is measured with) a viewer's font may set a text and still fit:
// a browser without Liberation Serif or a Times-compatible font falls back
// to a wider serif (DejaVu Serif sets the same text about a quarter wider).
const TextSlack = 1.25

// svgFonts is the font-family list the SVG files name instead of the bare
// "Liberation Serif": Times-compatible fonts of the same metrics first, so
// that a viewer without Liberation sets text as wide as it was laid out.
const svgFonts = "font-family:'Liberation Serif','Times New Roman',Times,'Nimbus Roman','Nimbus Roman No9 L',serif;"

// Render writes p as name.svg and name.png into dir: the title above
// everything (wrapped to the plot's width), the plot on the left, its
// legend in a column on the right, a margin around all of them. It
// changes p (its title and legend).
func Render(p *plot.Plot, dir, name string) error {
	margin := vg.Points(6)
	p.Title.Text = wrapText(p.Title.TextStyle, p.Title.Text, (PlotWidth-2*margin)/TextSlack)
	leg := p.Legend
	p.Legend = plot.NewLegend() // the plot itself draws no legend
	p.Legend.Top, p.Legend.Left = true, true
	leg.Top, leg.Left = true, true
	leg.Padding = vg.Points(4)
	leg.TextStyle.Font.Size = vg.Points(11)
	lr := leg.Rectangle(draw.Canvas{})
	legW := lr.Max.X - lr.Min.X
	if legW > 0 {
		// the thumbnails are fixed, the text may be set wider
		legW = leg.ThumbnailWidth + (legW-leg.ThumbnailWidth)*TextSlack + vg.Points(16)
	}
	w, h := PlotWidth+legW, plotHeight
	// a long legend (a CDF's line per transport and loss) makes the
	// figure taller rather than running off its bottom
	titleH := vg.Length(0)
	if p.Title.Text != "" {
		titleH = p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y + p.Title.Padding
	}
	if need := (lr.Max.Y - lr.Min.Y) + titleH + 2*margin + vg.Points(4); need > h {
		h = need
	}
	paint := func(c draw.Canvas) {
		c = draw.Crop(c, margin, -margin, margin, -margin)
		main := c
		main.Max.X -= legW
		p.Draw(main)
		if legW > 0 {
			lc := c
			lc.Min.X = main.Max.X + vg.Points(10)
			lc.Max.Y -= titleH // level with the top of the plotting area, below the title
			leg.Draw(lc)
		}
	}
	svg := vgsvg.New(w, h)
	paint(draw.New(svg))
	dpi := int(math.Ceil(MinPNGWidth / (float64(w) / vg.Inch.Points())))
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(max(dpi, 150)))
	paint(draw.New(img))
	var svgText bytes.Buffer
	if _, err := svg.WriteTo(&svgText); err != nil {
		return fmt.Errorf("figure %s.svg: %w", name, err)
	}
	svgOut := bytes.ReplaceAll(svgText.Bytes(), []byte("font-family:Liberation Serif;"), []byte(svgFonts))
	for _, out := range []struct {
		ext string
		wt  io.WriterTo
	}{{".svg", bytes.NewReader(svgOut)}, {".png", vgimg.PngCanvas{Canvas: img}}} {
		path := filepath.Join(dir, name+out.ext)
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("figure %s%s: %w", name, out.ext, err)
		}
		_, err = out.wt.WriteTo(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("figure %s%s: %w", name, out.ext, err)
		}
	}
	return nil
}

// wrapText breaks s into lines no wider than width in style sty, at
// spaces (a word longer than width keeps a line of its own).
func wrapText(sty text.Style, s string, width vg.Length) string {
	words := strings.Fields(s)
	var lines []string
	cur := ""
	for _, w := range words {
		if cur != "" && sty.Width(cur+" "+w) > width {
			lines = append(lines, cur)
			cur = w
			continue
		}
		cur = strings.TrimPrefix(cur+" "+w, " ")
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	return strings.Join(lines, "\n")
}
