package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"image/color"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/iotq/iotq/internal/stats"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/report/figplot"
)

// TestFiguresForReaders: every PNG is at least figplot.MinPNGWidth pixels wide,
// every text of the SVG lies inside the figure (checkFigureText),
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
		checkFigureText(t, filepath.Join(out, DirFigures, f.Name+".svg"))
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
		if b.Dx() < figplot.MinPNGWidth {
			t.Errorf("%s.png is %d px wide, want at least %d", f.Name, b.Dx(), figplot.MinPNGWidth)
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
	// every section of report.md has a table or a list under its heading
	for _, sec := range strings.Split(string(md), "\n## ")[1:] {
		head, body, _ := strings.Cut(sec, "\n")
		if !strings.Contains(body, "\n|") && !strings.Contains(body, "\n- ") && !strings.HasPrefix(strings.TrimSpace(body), "|") && !strings.HasPrefix(strings.TrimSpace(body), "- ") && head != "Methods" {
			t.Errorf("report.md section %q has no table or list", head)
		}
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

// svgText is one text element of an SVG figure in the figure's
// coordinates (points, y down from the top).
type svgText struct {
	x, baseline, size float64
	text              string
	rotated           bool
}

// readSVGTexts returns an SVG figure's size and its text elements (as
// package vgsvg writes them: the page flipped once, each text flipped back).
func readSVGTexts(t *testing.T, path string) (w, h float64, texts []svgText) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("font-family:Liberation Serif;")) {
		t.Errorf("%s names Liberation Serif without Times-compatible fallbacks", filepath.Base(path))
	}
	dec := xml.NewDecoder(bytes.NewReader(b))
	var rotate []bool // per open <g>: does it rotate?
	var cur *svgText
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range e.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch e.Name.Local {
			case "svg":
				vb := strings.Fields(attr["viewBox"])
				if len(vb) != 4 {
					t.Fatalf("%s: viewBox %q", path, attr["viewBox"])
				}
				w, _ = strconv.ParseFloat(vb[2], 64)
				h, _ = strconv.ParseFloat(vb[3], 64)
			case "g":
				rotate = append(rotate, strings.Contains(attr["transform"], "rotate"))
			case "text":
				x, _ := strconv.ParseFloat(attr["x"], 64)
				y, _ := strconv.ParseFloat(attr["y"], 64)
				m := regexp.MustCompile(`font-size:([0-9.]+)px`).FindStringSubmatch(attr["style"])
				if m == nil {
					t.Fatalf("%s: text without a font size: %q", path, attr["style"])
				}
				size, _ := strconv.ParseFloat(m[1], 64)
				cur = &svgText{x: x, baseline: h + y, size: size, rotated: slices.Contains(rotate, true)}
			}
		case xml.CharData:
			if cur != nil {
				cur.text += string(e)
			}
		case xml.EndElement:
			switch e.Name.Local {
			case "g":
				rotate = rotate[:len(rotate)-1]
			case "text":
				texts = append(texts, *cur)
				cur = nil
			}
		}
	}
	return w, h, texts
}

// checkFigureText: every upright text of the SVG figure lies inside its
// view box; the title lines (12 pt, at the top) and the legend entries
// (right of the plotting area) still do when a viewer's font sets them
// figplot.TextSlack times wider. It returns the texts for further checks.
func checkFigureText(t *testing.T, path string) []svgText {
	t.Helper()
	w, h, texts := readSVGTexts(t, path)
	name := filepath.Base(path)
	sty := plot.New().Title.TextStyle
	plotRight := float64(figplot.PlotWidth) - 6 // the plot's canvas ends at figplot.PlotWidth less the margin
	for _, tx := range texts {
		if tx.rotated {
			continue
		}
		sty.Font.Size = vg.Length(tx.size)
		tw := float64(sty.Width(tx.text))
		if tx.x < 0 || tx.x+tw > w || tx.baseline-tx.size < 0 || tx.baseline > h {
			t.Errorf("%s: %q at x %.1f..%.1f, baseline %.1f lies outside the view box %.0fx%.0f", name, tx.text, tx.x, tx.x+tw, tx.baseline, w, h)
		}
		switch {
		case tx.size == 12 && tx.baseline < 45: // a title line, centred
			c := tx.x + tw/2
			if c-tw*figplot.TextSlack/2 < 0 || c+tw*figplot.TextSlack/2 > w {
				t.Errorf("%s: title line %q would be cut off in a font %.2f times wider", name, tx.text, figplot.TextSlack)
			}
		case tx.x > plotRight: // a legend entry
			if tx.x+tw*figplot.TextSlack > w {
				t.Errorf("%s: legend entry %q would be cut off in a font %.2f times wider", name, tx.text, figplot.TextSlack)
			}
		}
	}
	return texts
}

// TestFigureTitleAndLegendInsideTheFrame: a title too long for one line is
// wrapped, not cut at the figure's edges; legend entries sit right of the
// plotting area and inside the figure.
func TestFigureTitleAndLegendInsideTheFrame(t *testing.T) {
	dir := t.TempDir()
	title := "Publisher energy per delivered message: satellite, E1 100B, every 1s, publisher egress impaired, sub link 12.5ms 20Mbit/s (QoS 0)"
	p := figplot.New(title, "loss (%)", "energy per delivered message (mJ)")
	legend := []string{"mqtts, publisher egress only", "quic, broker 0-RTT accept, both directions impaired"}
	for i, name := range legend {
		if err := figplot.AddLine(p, name, plotter.XYs{{X: 0, Y: float64(i)}, {X: 5, Y: float64(i + 1)}}, figplot.Blue(), nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := figplot.Render(p, dir, "long"); err != nil {
		t.Fatal(err)
	}
	texts := checkFigureText(t, filepath.Join(dir, "long.svg"))
	var titleLines []string
	legendX := map[string]float64{}
	for _, tx := range texts {
		if tx.size == 12 && tx.baseline < 45 {
			titleLines = append(titleLines, tx.text)
		}
		if slices.Contains(legend, tx.text) {
			legendX[tx.text] = tx.x
		}
	}
	if len(titleLines) < 2 || strings.Join(titleLines, " ") != title {
		t.Errorf("title lines %q, want the title wrapped over two or more lines", titleLines)
	}
	for _, name := range legend {
		x, ok := legendX[name]
		if !ok || x <= float64(figplot.PlotWidth)-6 {
			t.Errorf("legend entry %q at x %.1f (found %v), want right of the plotting area (%.1f)", name, x, ok, float64(figplot.PlotWidth)-6)
		}
	}
}

// TestSplitCommonParts: what all variants share moves to the title.
func TestSplitCommonParts(t *testing.T) {
	got, common := splitCommonParts([]string{"50B, every 1ms, publisher egress impaired", "100B, every 1ms, publisher egress impaired", "100B, every 10ms, publisher egress impaired"})
	if strings.Join(got, "|") != "50B, every 1ms|100B, every 1ms|100B, every 10ms" || common != "publisher egress impaired" {
		t.Fatalf("labels %q, common %q", got, common)
	}
	if got, common := splitCommonParts([]string{"50B", "50B, 3 retries"}); strings.Join(got, "|") != "50B|3 retries" || common != "50B" {
		t.Fatalf("labels %q, common %q", got, common)
	}
}

// TestFiguresSplitPatterns: cells that differ only in their pattern (E8's
// batch, batch-echo and batch-resume) get figures of their own instead of
// boxes and points of one transport and loss drawn over each other.
func TestFiguresSplitPatterns(t *testing.T) {
	var cs []*CellResult
	for _, pat := range []string{"batch", "batch-resume"} {
		for _, tr := range []string{"amqps", "amqp+quic"} {
			for _, l := range []float64{0, 5} {
				c := &CellResult{Cell: "E8_" + pat + "_" + tr + loss(l), Experiment: "E8", Profile: "satellite", Transport: tr, Pattern: pat,
					Kind: KindPeriodic, LossPct: l, QoS: 1, Size: 100, DelayBoundMs: 300}
				c.delays = []float64{310 + l, 320 + l, 330, 900}
				c.DelayMs = stats.Summarize(c.delays)
				cs = append(cs, c)
			}
		}
	}
	dir := t.TempDir()
	figs, err := drawFigures(t.Context(), &Summary{Cells: cs}, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range figs {
		names = append(names, f.Name)
	}
	for _, want := range []string{"delay-box-satellite-E8-100B-batch", "delay-box-satellite-E8-100B-batch-resume", "delay-mean-satellite-E8-100B-batch-resume"} {
		if !slices.Contains(names, want) {
			t.Errorf("no figure %s among %q", want, names)
		}
	}
	if slices.Contains(names, "delay-box-satellite") {
		t.Errorf("one box figure mixes the patterns: %q", names)
	}
}

// TestTransportColorsDiffer: every transport of a figure has its own
// colour; MQTT over TCP is blue and over QUIC orange also beside CoAP.
func TestTransportColorsDiffer(t *testing.T) {
	for _, trs := range [][]string{
		transports([]*CellResult{{Transport: "coap"}, {Transport: "mqtt"}, {Transport: "coap+quic"}, {Transport: "quic"}}),
		{"mqtts", "quic", "quic, broker 0-RTT accept"},
		{"amqps", "amqp+quic"},
	} {
		seen := map[color.Color]string{}
		for _, tr := range trs {
			c := transportColor(tr, trs)
			if o, ok := seen[c]; ok {
				t.Errorf("%q and %q share a colour among %q", o, tr, trs)
			}
			seen[c] = tr
		}
	}
	e7 := []string{"coap", "mqtt", "coap+quic", "quic"}
	if transportColor("mqtt", e7) != figplot.Blue() || transportColor("quic", e7) != figplot.Orange() {
		t.Error("E7: mqtt is not blue or quic not orange")
	}
	if transportColor("amqps", []string{"amqps", "amqp+quic"}) != figplot.Blue() || transportColor("amqp+quic", []string{"amqps", "amqp+quic"}) != figplot.Orange() {
		t.Error("E8: amqps is not blue or amqp+quic not orange")
	}
}

// TestLongLegendMakesTheFigureTaller: a legend longer than the plot (a CDF
// of four transports at six loss rates) stays inside the figure.
func TestLongLegendMakesTheFigureTaller(t *testing.T) {
	dir := t.TempDir()
	p := figplot.New("CDF", "delay (ms)", "fraction")
	for i := range 24 {
		if err := figplot.AddLine(p, fmt.Sprintf("coap+quic, %d%% loss", i), plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: float64(i)}}, figplot.Orange(), nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := figplot.Render(p, dir, "tall"); err != nil {
		t.Fatal(err)
	}
	texts := checkFigureText(t, filepath.Join(dir, "tall.svg"))
	n := 0
	for _, tx := range texts {
		if strings.HasPrefix(tx.text, "coap+quic, ") {
			n++
		}
	}
	if n != 24 {
		t.Fatalf("%d legend entries drawn, want 24", n)
	}
}

// TestDelayCDFLogAxisForWideSpreads: delays from the link's 25 ms to
// seconds get a logarithmic delay axis; a narrow spread a linear one.
func TestDelayCDFLogAxisForWideSpreads(t *testing.T) {
	mk := func(tr string, vals []float64) *CellResult {
		return &CellResult{Cell: tr, Transport: tr, Profile: "wifi", delays: vals}
	}
	var wide, narrow []float64
	for i := range 200 {
		wide = append(wide, 25+float64(i*i))
		narrow = append(narrow, 25+float64(i)/10)
	}
	for _, c := range []struct {
		vals []float64
		log  bool
	}{{wide, true}, {narrow, false}} {
		var got *plot.Plot
		save := func(p *plot.Plot, f Figure) error { got = p; return nil }
		keep := func(*CellResult) bool { return true }
		if err := delayCDF([]*CellResult{mk("mqtt", c.vals), mk("quic", c.vals)}, keep, "wifi", "wifi", "QoS 1", false, save); err != nil || got == nil {
			t.Fatalf("no CDF: %v", err)
		}
		if isLog := strings.Contains(got.X.Label.Text, "log scale"); isLog != c.log {
			t.Errorf("spread %v..%v: x label %q, want log scale %v", c.vals[0], c.vals[len(c.vals)-1], got.X.Label.Text, c.log)
		}
	}
}

// TestFigureLegendsAndZeroAxis: legends name the stacks (TCP+TLS, QUIC),
// not URL schemes, and a figure of point estimates (mean delay against
// loss) starts its y axis at zero, while a box plot keeps the data's range.
func TestFigureLegendsAndZeroAxis(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "results")
	os.MkdirAll(dir, 0o755)
	writeFixture(t, dir)
	_, out := generate(t, dir, Options{})
	texts := func(name string) []string {
		_, _, ts := readSVGTexts(t, filepath.Join(out, DirFigures, name+".svg"))
		var s []string
		for _, x := range ts {
			s = append(s, x.text)
		}
		return s
	}
	mean := texts("delay-mean-wifi")
	for _, want := range []string{"TCP+TLS", "QUIC", "0"} {
		if !slices.Contains(mean, want) {
			t.Errorf("delay-mean-wifi has no text %q (legend or zero tick): %q", want, mean)
		}
	}
	for _, scheme := range []string{"mqtts", "quic"} {
		if slices.Contains(mean, scheme) {
			t.Errorf("delay-mean-wifi's legend names the URL scheme %q", scheme)
		}
	}
	if box := texts("delay-box-wifi"); slices.Contains(box, "0") {
		t.Errorf("delay-box-wifi starts at 0: a box plot keeps the data's range: %q", box)
	}
	if got := transportLabel("coap"); got != "CoAP/UDP" {
		t.Errorf("transportLabel(coap) = %q, want CoAP/UDP", got)
	}
}

// TestLogCDFOption: Options.LogCDF puts the delay CDF on a log axis even
// when the delays do not span the factor that switches it on by itself.
func TestLogCDFOption(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "results")
	os.MkdirAll(dir, 0o755)
	writeFixture(t, dir)
	for _, logCDF := range []bool{false, true} {
		_, out := generate(t, dir, Options{LogCDF: logCDF})
		_, _, ts := readSVGTexts(t, filepath.Join(out, DirFigures, "delay-cdf-wifi.svg"))
		got := false
		for _, x := range ts {
			got = got || strings.Contains(x.text, "log scale")
		}
		if got != logCDF {
			t.Errorf("LogCDF %v: delay-cdf-wifi has a log axis: %v", logCDF, got)
		}
	}
}

func TestLabelWords(t *testing.T) {
	for in, want := range map[string]string{
		"100B, sub link 50ms 10Gbit/s, 2 retries": "100 B payload, subscriber link 50ms each way at 10 Gbit/s, 2 link-layer retries",
		"32B, batch-resume":                       "32 B payload, batch-resume",
		"every 1s":                                "every 1s",
	} {
		if got := labelWords(in); got != want {
			t.Errorf("labelWords(%q) = %q, want %q", in, got, want)
		}
	}
}
