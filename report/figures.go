package report

import (
	"context"
	"image/color"
	"math"
	"sort"
	"strings"

	"gonum.org/v1/plot"

	"github.com/iotq/iotq/report/figplot"
)

// transportColor gives every transport of a figure its own colour: the
// MQTT pair blue (TCP: mqtt, mqtts; else the first transport without QUIC)
// and orange (quic; else the first QUIC transport), the others the palette
// in order of appearance (E7's coap and coap+quic beside mqtt and quic).
func transportColor(tr string, all []string) color.Color {
	primary := func(quic bool, preferred func(string) bool) string {
		first := ""
		for _, o := range all {
			if isQUIC(o) != quic {
				continue
			}
			if preferred(o) {
				return o
			}
			if first == "" {
				first = o
			}
		}
		return first
	}
	tcp := primary(false, func(o string) bool { return strings.HasPrefix(o, "mqtt") })
	quic := primary(true, func(o string) bool { return o == "quic" })
	switch tr {
	case quic:
		return figplot.Orange()
	case tcp:
		return figplot.Blue()
	}
	n := 0
	for _, o := range all {
		if o == tcp || o == quic {
			continue
		}
		if o == tr {
			return figplot.Other(n)
		}
		n++
	}
	if isQUIC(tr) {
		return figplot.Orange()
	}
	return figplot.Blue()
}

// boxSeries orders, colours and names the series of a box plot as
// transports: over TCP before over QUIC, then by name; a series may name a
// variant after its transport ("quic, broker 0-RTT accept") and sorts
// with its transport.
func boxSeries() figplot.Series {
	overQUIC := func(series string) bool { tr, _, _ := strings.Cut(series, ","); return isQUIC(tr) }
	return figplot.Series{
		Less: func(a, b string) bool {
			if overQUIC(a) != overQUIC(b) {
				return !overQUIC(a)
			}
			return a < b
		},
		Color: transportColor,
		Label: transportLabel,
	}
}

// keepsYRange says whether a figure keeps its data's y range: box plots
// and CDFs show distributions, xi is drawn with its confidence intervals.
func keepsYRange(name string) bool {
	for _, p := range []string{"delay-box-", "completion-box-", "startup-box-", "delay-cdf-", "xi-"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// labelWords spells a variant label out for a figure's title ("100B,
// sub link 50ms 10Gbit/s, 2 retries" becomes "100 B payload, subscriber
// link 50ms at 10 Gbit/s, 2 link-layer retries"); file names keep the
// short label.
func labelWords(label string) string {
	parts := strings.Split(label, ", ")
	for i, p := range parts {
		switch {
		case strings.HasSuffix(p, "B") && strings.Trim(p[:len(p)-1], "0123456789") == "" && len(p) > 1:
			parts[i] = p[:len(p)-1] + " B payload"
		case strings.HasPrefix(p, "sub link "):
			f := strings.Fields(strings.TrimPrefix(p, "sub link "))
			if len(f) == 2 {
				rate := f[1]
				for _, u := range []string{"Gbit/s", "Mbit/s", "kbit/s"} {
					rate = strings.Replace(rate, u, " "+u, 1)
				}
				parts[i] = "subscriber link " + f[0] + " each way at " + rate
			}
		case strings.HasSuffix(p, " retries"):
			parts[i] = strings.TrimSuffix(p, " retries") + " link-layer retries"
		}
	}
	return strings.Join(parts, ", ")
}

// transportLabel names a transport in a legend: the stack it runs on,
// not its URL scheme.
func transportLabel(tr string) string {
	switch tr {
	case "mqtts", "amqps":
		return "TCP+TLS"
	case "quic", "amqp+quic":
		return "QUIC"
	case "mqtt", "amqp":
		return "TCP"
	case "coap":
		return "CoAP/UDP"
	case "coap+quic":
		return "CoAP/QUIC"
	case "ws":
		return "WebSocket"
	case "wss":
		return "WebSocket+TLS"
	}
	return tr
}

// drawFigures draws every figure the data allows into dir as PNG and SVG.
func drawFigures(ctx context.Context, s *Summary, dir string, logCDF bool) ([]Figure, error) {
	var figs []Figure
	save := func(p *plot.Plot, f Figure) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		// point estimates start their y axis at zero, so two points a few
		// per cent apart do not look like a factor; distributions (boxes,
		// CDFs) and xi (drawn with its intervals) keep the data's range
		fromZero := p.Y.Min >= 0 && !keepsYRange(f.Name)
		if fromZero {
			p.Y.Min = 0
		}
		// a little room around the data (the legend is outside)
		if span := p.Y.Max - p.Y.Min; span > 0 {
			p.Y.Max += 0.05 * span
			if !fromZero {
				p.Y.Min -= 0.05 * span
			}
		} else {
			p.Y.Max++
			p.Y.Min--
		}
		if err := figplot.Render(p, dir, f.Name); err != nil {
			return err
		}
		figs = append(figs, f)
		return nil
	}
	for _, prof := range profiles(s.Cells) {
		for _, kind := range []string{KindPeriodic, KindA, KindB} {
			all := selectCells(s.Cells, prof, kind)
			// cells of one kind but several patterns (E8's batch, batch-echo
			// and batch-resume; B's reconnect and reconnect-early) get figures
			// of their own: boxes and lines of one transport and loss never
			// mix patterns
			groups, labels := splitVariants(all, true)
			if kind == KindPeriodic && len(groups) > 1 && len(losses(all)) == 1 {
				// a sweep over sizes or intervals at one loss rate (E3a):
				// compare the variants side by side instead of lines over loss
				if err := variantFigures(all, prof, save); err != nil {
					return figs, err
				}
				continue
			}
			if kind == KindPeriodic {
				// E1-E3 run with the publisher's egress impaired and as the
				// symmetric variant: one figure shows both side by side
				if err := directionFigure(all, prof, save); err != nil {
					return figs, err
				}
			}
			for i, cs := range groups {
				// a profile with several variants (sizes, intervals, publishers,
				// subscriber links) gets one figure per variant
				name, title := prof, prof
				if len(groups) > 1 {
					name = prof + "-" + experimentOf(cs) + "-" + labels[i]
					title = prof + ", " + experimentOf(cs) + " " + labelWords(labels[i])
				}
				var err error
				switch kind {
				case KindPeriodic:
					err = periodicFigures(cs, name, title, logCDF, save)
				case KindA:
					err = completionFigures(cs, s.Xi, name, title, save)
				case KindB:
					err = startupFigures(cs, name, title, save)
				}
				if err != nil {
					return figs, err
				}
			}
		}
	}
	if err := failoverFigure(s, save); err != nil { // E11: report/e11.go
		return figs, err
	}
	if err := pathChangeFigure(s, save); err != nil { // E10: report/e10.go
		return figs, err
	}
	if err := holFigure(s, save); err != nil { // E9: report/e9.go
		return figs, err
	}
	return figs, nil
}

func profiles(cs []*CellResult) []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range cs { // already sorted by experiment, profile rank
		if !seen[c.Profile] {
			seen[c.Profile] = true
			out = append(out, c.Profile)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if rank(out[i]) != rank(out[j]) {
			return rank(out[i]) < rank(out[j])
		}
		return out[i] < out[j]
	})
	return out
}

// splitVariants groups cells by experiment and variant (and, with
// byPattern, pattern: reconnect and reconnect-early get figures of their
// own), in order of appearance; labels name each group.
func splitVariants(cs []*CellResult, byPattern bool) ([][]*CellResult, []string) {
	var groups [][]*CellResult
	var labels []string
	idx := map[string]int{}
	patterns := map[string]bool{}
	for _, c := range cs {
		patterns[c.Pattern] = true
	}
	for _, c := range cs {
		k := c.Experiment + "|" + c.variant()
		label := c.variantLabel()
		if byPattern && len(patterns) > 1 {
			k += "|" + c.Pattern
			label = strings.TrimPrefix(label+", "+c.Pattern, ", ")
		}
		i, ok := idx[k]
		if !ok {
			i = len(groups)
			idx[k] = i
			groups = append(groups, nil)
			labels = append(labels, label)
		}
		groups[i] = append(groups[i], c)
	}
	return groups, labels
}

func experimentOf(cs []*CellResult) string {
	if len(cs) == 0 {
		return ""
	}
	return cs[0].Experiment
}

func selectCells(cs []*CellResult, prof, kind string) []*CellResult {
	var out []*CellResult
	for _, c := range cs {
		if c.Profile == prof && c.Kind == kind {
			out = append(out, c)
		}
	}
	return out
}

func slug(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if (ch < 'a' || ch > 'z') && (ch < 'A' || ch > 'Z') && (ch < '0' || ch > '9') && ch != '-' {
			b[i] = '-'
		}
	}
	out := strings.Trim(strings.Join(strings.FieldsFunc(string(b), func(r rune) bool { return r == '-' }), "-"), "-")
	if out == "" {
		return "none"
	}
	return out
}

func transports(cs []*CellResult) []string {
	var out []string
	seen := map[string]bool{}
	for _, c := range cs {
		if !seen[c.Transport] {
			seen[c.Transport] = true
			out = append(out, c.Transport)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if isQUIC(out[i]) != isQUIC(out[j]) {
			return !isQUIC(out[i])
		}
		return out[i] < out[j]
	})
	return out
}

func losses(cs []*CellResult) []float64 {
	var out []float64
	seen := map[float64]bool{}
	for _, c := range cs {
		if !seen[c.LossPct] {
			seen[c.LossPct] = true
			out = append(out, c.LossPct)
		}
	}
	sort.Float64s(out)
	return out
}

func minQoS(cs []*CellResult) int {
	q := math.MaxInt
	for _, c := range cs {
		q = min(q, c.QoS)
	}
	return q
}

// lossTicks labels the x axis with the loss rates that were measured.
func lossTicks(p *plot.Plot, ls []float64) {
	if len(ls) == 0 {
		return
	}
	ticks := make([]plot.Tick, len(ls))
	for i, l := range ls {
		ticks[i] = plot.Tick{Value: l, Label: loss(l)}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	if len(ls) == 1 {
		p.X.Min, p.X.Max = ls[0]-0.5, ls[0]+0.5
	}
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// nanValues is n values with no bar (figplot.BarSeries).
func nanValues(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = math.NaN()
	}
	return v
}
