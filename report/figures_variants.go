// Figures that set a profile's variants side by side at one loss rate.

package report

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/iotq/iotq/report/figplot"
)

// variantFigures compares the variants of one profile at a single loss
// rate: mean delay, average publisher power and packets per second per
// variant and transport.
func variantFigures(cs []*CellResult, prof string, save func(*plot.Plot, Figure) error) error {
	q0 := minQoS(cs)
	var keep []*CellResult
	for _, c := range cs {
		if c.QoS == q0 {
			keep = append(keep, c)
		}
	}
	metrics := []struct {
		name, title, ylabel, caption string
		value                        func(*CellResult) float64
	}{
		{"delay-variants", "Mean one-way delay by variant", "mean one-way delay (ms)",
			"Mean one-way delay per payload size / interval and transport.", func(c *CellResult) float64 {
				if c.DelayMs.N == 0 {
					return math.NaN()
				}
				return c.DelayMs.Mean
			}},
		{"power-variants", "Average publisher device power by variant", "average device power (W)",
			"Estimated average power of the whole publishing device over its send window (base power + CPU time x active power + radio model; the testbed measured this with a meter on the board).", func(c *CellResult) float64 {
				if c.Energy == nil {
					return math.NaN()
				}
				return c.Energy.DeviceMeanW
			}},
		{"cpu-variants", "Publisher CPU time by variant", "CPU time (s)",
			"CPU time (user + system) of the publisher process, all repetitions; measured, no model.", func(c *CellResult) float64 { return c.CPUSeconds }},
		{"pps-variants", "Packets per second by variant", "packets per second (both directions)",
			"IP packets per second on the publisher's link, both directions.", func(c *CellResult) float64 { return c.PacketsPerSecond }},
	}
	groups, labels := splitVariants(keep, true)
	// what every variant shares goes into the title, once
	labels, common := splitCommonParts(labels)
	setting := fmt.Sprintf("QoS %d, loss %s%%", q0, loss(keep[0].LossPct))
	if common != "" {
		setting += ", " + common
	}
	trs := transports(keep)
	for _, m := range metrics {
		p := figplot.New(fmt.Sprintf("%s: %s (%s)", m.title, prof, setting), "variant", m.ylabel)
		series := make([]figplot.BarSeries, len(trs))
		for i, tr := range trs {
			series[i] = figplot.BarSeries{Name: transportLabel(tr), Color: transportColor(tr, trs), Values: nanValues(len(groups))}
			for j, g := range groups {
				for _, c := range g {
					if c.Transport == tr && finite(m.value(c)) {
						series[i].Values[j] = m.value(c)
					}
				}
			}
		}
		drawn, err := figplot.AddGroupedBars(p, labels, series, vg.Points(300), vg.Points(20))
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		if drawn == 0 {
			continue
		}
		p.X.Tick.Label.Rotation = 0.5
		p.X.Tick.Label.XAlign = draw.XRight
		if err := save(p, Figure{Name: m.name + "-" + slug(prof+"-"+experimentOf(keep)), Title: m.title + ", " + prof, Caption: m.caption}); err != nil {
			return err
		}
	}
	return nil
}

// splitCommonParts takes the comma-separated parts that every label has
// out of the labels; it returns the shortened labels and the common parts.
// A label left empty keeps its text.
func splitCommonParts(labels []string) ([]string, string) {
	if len(labels) < 2 {
		return labels, ""
	}
	split := func(l string) []string { return strings.Split(l, ", ") }
	var common []string
	for _, part := range split(labels[0]) {
		all := true
		for _, l := range labels[1:] {
			all = all && slices.Contains(split(l), part)
		}
		if all && !slices.Contains(common, part) {
			common = append(common, part)
		}
	}
	out := make([]string, len(labels))
	for i, l := range labels {
		var keep []string
		for _, part := range split(l) {
			if !slices.Contains(common, part) {
				keep = append(keep, part)
			}
		}
		out[i] = strings.Join(keep, ", ")
		if out[i] == "" {
			out[i] = l
		}
	}
	return out, strings.Join(common, ", ")
}
