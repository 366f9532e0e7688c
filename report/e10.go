package report

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"

	"github.com/iotq/iotq/internal/stats"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/report/figplot"
)

// Metrics of E10's comparisons (Comparison.Metric): cuts of the mean over
// the repetitions, QUIC against TCP+TLS in one configuration.
const (
	MetricGapCut        = "gap_cut_pct"         // the longest pause between receipts around the change
	MetricFirstAfterCut = "first_after_cut_pct" // change to the first receipt of a message sent after it
)

// PathChangeResult is one E10 cell (pattern path-change): the publisher's
// path changed under a QoS 1 stream, summed and averaged over its
// repetitions. Times in s, the mean over the repetitions with a percentile
// bootstrap interval (NaN bounds for one repetition).
type PathChangeResult struct {
	Cell       string  `json:"cell"`
	Experiment string  `json:"experiment"`
	Profile    string  `json:"profile"`
	LossPct    float64 `json:"loss_pct"`
	Transport  string  `json:"transport"`
	PathChange string  `json:"path_change"`
	LinkRTTMs  float64 `json:"link_rtt_ms"`
	// ChangeLinkRTTMs is the link's round trip after the change.
	ChangeLinkRTTMs float64 `json:"change_link_rtt_ms"`
	Reps            int     `json:"reps"`
	// Sums over the repetitions (records.E10Row).
	Sent       int   `json:"sent"`
	Delivered  int   `json:"delivered"`
	Lost       int   `json:"lost"`
	Duplicated int   `json:"duplicated"`
	Reconnects int   `json:"reconnects"`
	Resent     int   `json:"resent"`
	Resumed    int   `json:"reconnects_resumed"`
	DropNAT    int64 `json:"drop_nat"`
	// GapS is the longest pause between receipts whose later one came
	// after the change; GapBeforeS the same before it (the stream's own
	// spacing); FirstAfterS the change to the first receipt of a message
	// sent after it; ReconnectS the loss noticed to the new CONNACK, over
	// the repetitions that reconnected.
	GapS        stats.Interval `json:"gap_s"`
	GapBeforeS  stats.Interval `json:"gap_before_s"`
	FirstAfterS stats.Interval `json:"first_after_s"`
	ReconnectS  stats.Interval `json:"reconnect_s"`

	gaps, firsts []float64 // per repetition, for the comparisons
}

// pathChangeResults reads DIR/cells/*/rep-*/e10.csv, one PathChangeResult
// per cell in cell order; nil when there are none.
func pathChangeResults(dir string, seed uint64, resamples int) []*PathChangeResult {
	files, _ := filepath.Glob(filepath.Join(dir, "cells", "*", "rep-*", records.FileE10))
	slices.Sort(files)
	byCell := map[string]*PathChangeResult{}
	before, recon := map[string][]float64{}, map[string][]float64{}
	for _, f := range files {
		rows, _, err := records.ReadFile[records.E10Row](f)
		if err != nil {
			continue
		}
		for _, r := range rows {
			pr := byCell[r.Cell]
			if pr == nil {
				pr = &PathChangeResult{Cell: r.Cell, Experiment: r.Experiment, Profile: r.Profile, LossPct: r.LossPct,
					Transport: r.Transport, PathChange: r.PathChange, LinkRTTMs: float64(r.LinkRTTNs) / 1e6,
					ChangeLinkRTTMs: float64(r.ChangeLinkRTTNs) / 1e6}
				byCell[r.Cell] = pr
			}
			pr.Reps++
			pr.Sent += r.Sent
			pr.Delivered += r.Delivered
			pr.Lost += r.Lost
			pr.Duplicated += r.Duplicated
			pr.Reconnects += r.Reconnects
			pr.Resent += r.Resent
			pr.DropNAT += r.DropNAT
			if r.ReconnectResumed {
				pr.Resumed++
			}
			if r.GapNs > 0 {
				pr.gaps = append(pr.gaps, float64(r.GapNs)/1e9)
			}
			if r.GapBeforeNs > 0 {
				before[r.Cell] = append(before[r.Cell], float64(r.GapBeforeNs)/1e9)
			}
			if r.FirstAfterNs > 0 {
				pr.firsts = append(pr.firsts, float64(r.FirstAfterNs)/1e9)
			}
			if r.ReconnectNs > 0 {
				recon[r.Cell] = append(recon[r.Cell], float64(r.ReconnectNs)/1e9)
			}
		}
	}
	opts := stats.BootstrapOptions{Seed: seed, Resamples: resamples}
	mean := func(s [][]float64) float64 { return stats.Mean(s[0]) }
	var out []*PathChangeResult
	for _, pr := range byCell {
		pr.GapS = stats.Bootstrap([][]float64{pr.gaps}, mean, opts)
		pr.GapBeforeS = stats.Bootstrap([][]float64{before[pr.Cell]}, mean, opts)
		pr.FirstAfterS = stats.Bootstrap([][]float64{pr.firsts}, mean, opts)
		pr.ReconnectS = stats.Bootstrap([][]float64{recon[pr.Cell]}, mean, opts)
		out = append(out, pr)
	}
	slices.SortFunc(out, func(a, b *PathChangeResult) int {
		if c := cmpStrings(a.Experiment, b.Experiment); c != 0 {
			return c
		}
		return cmpStrings(a.Cell, b.Cell)
	})
	return out
}

// pathChangeComparisons pairs each configuration's TCP+TLS and QUIC cells
// (experiment, profile, loss, change) and compares the delivery gap and
// the time to the first message after the change: a cut of the mean over
// the repetitions, its interval from the two cells' repetitions resampled
// independently (a configuration of its own: Within).
func pathChangeComparisons(rs []*PathChangeResult, seed uint64, resamples int) []*Comparison {
	type key struct {
		exp, prof, change string
		loss              float64
	}
	tcp, quic := map[key]*PathChangeResult{}, map[key]*PathChangeResult{}
	var keys []key
	for _, r := range rs {
		k := key{r.Experiment, r.Profile, r.PathChange, r.LossPct}
		switch r.Transport {
		case "quic":
			quic[k] = r
		case "mqtts":
			tcp[k] = r
		default:
			continue
		}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	opts := stats.BootstrapOptions{Seed: seed, Resamples: resamples}
	var out []*Comparison
	for _, k := range keys {
		t, q := tcp[k], quic[k]
		if t == nil || q == nil {
			continue
		}
		lossWord := "none"
		if k.loss > 0 {
			lossWord = loss(k.loss) + " %"
		}
		for _, m := range []struct {
			metric string
			t, q   []float64
		}{{MetricGapCut, t.gaps, q.gaps}, {MetricFirstAfterCut, t.firsts, q.firsts}} {
			if len(m.t) == 0 || len(m.q) == 0 {
				continue
			}
			iv := stats.BootstrapRatioOfMeans(m.q, m.t, opts)
			c := &Comparison{Experiment: k.exp, Protocol: records.ProtocolMQTT, Start: k.change, Loss: lossWord,
				Metric: m.metric, Configurations: 1, TCPCell: t.Cell, QUICCell: q.Cell, TCPTransport: t.Transport,
				QUICTransport: q.Transport, TCP: stats.Mean(m.t), QUIC: stats.Mean(m.q),
				Estimate: 100 * (1 - iv.Estimate), Lo: 100 * (1 - iv.Hi), Hi: 100 * (1 - iv.Lo),
				Within: true, SmallN: len(m.t) < smallN || len(m.q) < smallN}
			c.Verdict = verdict(c)
			out = append(out, c)
		}
	}
	return out
}

// pathChangeTable is the E10 table, one row per cell, with the plain words
// of the comparisons in its introduction.
func pathChangeTable(s *Summary) tab {
	intro := "One row per cell of pattern path-change: a QoS 1 stream from the publisher behind the emulated link, whose " +
		"path changes during the stream: rebind = the NAT in front of the publisher gives every flow a new port (the broker " +
		"sees a new source address, packets to the old port are dropped: nat drops); wifi-to-cellular = the link switches " +
		"from the wifi profile's delay and rate to the cellular profile's and the NAT rebinds at the same instant. " +
		"mqtts: MQTT over TCP+TLS, whose publisher (iotq pub --reconnect) dials again with TLS resumption and resends what " +
		"was not acknowledged; quic: MQTT over QUIC, which should keep its connection (reconnects 0). Counts summed over the " +
		"repetitions: lost = sent, never delivered; duplicated = receipts beyond a message's first. gap = the longest pause " +
		"between two receipts at the subscriber whose later one came after the change (gap before: the same before it, the " +
		"stream's own spacing); first after = the change to the first receipt of a message sent after it; reconnect = the " +
		"loss noticed to the new connection's CONNACK; in s, the mean over the repetitions with a 95 % percentile " +
		"bootstrap interval (repetitions resampled)."
	if words := pathChangeWords(s); len(words) > 0 {
		intro += " " + strings.Join(words, " ")
	}
	t := tab{id: "path-change", title: "Path change (E10)", intro: intro,
		head: []string{"experiment", "profile", "loss %", "change", "link RTT ms", "RTT after ms", "transport", "reps", "sent",
			"delivered", "lost", "duplicated", "reconnects", "resumed", "resent", "nat drops",
			"gap mean", "gap CI low", "gap CI high", "gap before mean", "first after mean", "first after CI low", "first after CI high",
			"reconnect mean"}}
	for _, p := range s.PathChange {
		t.rows = append(t.rows, []string{p.Experiment, p.Profile, loss(p.LossPct), p.PathChange, fmtF(p.LinkRTTMs, 1),
			fmtF(p.ChangeLinkRTTMs, 1), p.Transport, strconv.Itoa(p.Reps), strconv.Itoa(p.Sent), strconv.Itoa(p.Delivered),
			strconv.Itoa(p.Lost), strconv.Itoa(p.Duplicated), strconv.Itoa(p.Reconnects), strconv.Itoa(p.Resumed),
			strconv.Itoa(p.Resent), strconv.FormatInt(p.DropNAT, 10),
			fmtF(p.GapS.Estimate, 3), fmtF(p.GapS.Lo, 3), fmtF(p.GapS.Hi, 3), fmtF(p.GapBeforeS.Estimate, 3),
			fmtF(p.FirstAfterS.Estimate, 3), fmtF(p.FirstAfterS.Lo, 3), fmtF(p.FirstAfterS.Hi, 3),
			fmtF(p.ReconnectS.Estimate, 3)})
	}
	return t
}

// pathChangeWords says in words, from the data, what each transport did
// across the changes: reconnections, losses, duplicates, and the gap and
// first-message comparisons.
func pathChangeWords(s *Summary) []string {
	if len(s.PathChange) == 0 {
		return nil
	}
	var out []string
	for _, tr := range []string{"quic", "mqtts"} {
		var reps, recon, lost, dup, sent int
		for _, p := range s.PathChange {
			if p.Transport == tr {
				reps += p.Reps
				recon += p.Reconnects
				lost += p.Lost
				dup += p.Duplicated
				sent += p.Sent
			}
		}
		if reps == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("%s: %d reconnections in %d repetitions, %d of %d messages lost, %d duplicated.",
			transportLabel(tr), recon, reps, lost, sent, dup))
	}
	for _, c := range s.Comparisons {
		if c.Metric != MetricGapCut && c.Metric != MetricFirstAfterCut {
			continue
		}
		out = append(out, fmt.Sprintf("%s, %s: %s, QUIC %s s against TCP+TLS %s s; %s: %s.", c.Start, lossWords(c.Loss),
			metricWords(c.Metric), fmtF(c.QUIC, 3), fmtF(c.TCP, 3), estimateText(c), c.Verdict))
	}
	return out
}

func lossWords(l string) string {
	if l == "none" {
		return "no loss"
	}
	return l + " loss"
}

// pathChangeFigure draws the delivery gap per change kind (and loss) and
// transport: means over the repetitions with their bootstrap intervals.
func pathChangeFigure(s *Summary, save func(*plot.Plot, Figure) error) error {
	if len(s.PathChange) == 0 {
		return nil
	}
	confs, trs := lossConfsAndTransports(s.PathChange,
		func(p *PathChangeResult) lossConf { return lossConf{p.PathChange, p.LossPct} },
		func(p *PathChangeResult) string { return p.Transport })
	p := figplot.New("E10: delivery gap around the path change", "change, loss", "delivery gap (s)")
	series := make([]figplot.EstimateSeries, len(trs))
	for i, tr := range trs {
		series[i] = figplot.EstimateSeries{Name: transportLabel(tr), Color: transportColor(tr, trs)}
		for j, c := range confs {
			for _, r := range s.PathChange {
				if r.Transport == tr && r.PathChange == c.name && r.LossPct == c.loss {
					series[i].Points = append(series[i].Points, figplot.Estimate{Cat: j, Est: r.GapS.Estimate, Lo: r.GapS.Lo, Hi: r.GapS.Hi})
				}
			}
		}
	}
	labels := make([]string, len(confs))
	for i, c := range confs {
		labels[i] = c.label()
	}
	drawn, err := figplot.AddEstimates(p, labels, series)
	if err != nil {
		return fmt.Errorf("path change figure: %w", err)
	}
	if drawn == 0 {
		return nil
	}
	p.Y.Min = math.Min(p.Y.Min, 0)
	return save(p, Figure{Name: "path-change-gap", Title: "E10: delivery gap around the path change",
		Caption: "Per path change (and loss) and transport, the longest pause between two receipts at the subscriber whose " +
			"later one came after the change: the mean over the repetitions with its 95 % percentile bootstrap interval " +
			"(no bar: one repetition)."})
}
