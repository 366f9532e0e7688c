package report

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"

	"github.com/iotq/iotq/internal/stats"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/report/figplot"
)

// FailoverResult is one E11 cell (pattern failover): a node of the cluster
// killed under a QoS 1 stream, summed and averaged over its repetitions.
// Times in s with a percentile bootstrap interval over the repetitions
// (the mean of the resampled repetitions; NaN bounds for one repetition).
type FailoverResult struct {
	Cell       string  `json:"cell"`
	Experiment string  `json:"experiment"`
	Profile    string  `json:"profile"`
	LossPct    float64 `json:"loss_pct"`
	Transport  string  `json:"transport"`
	LinkRTTMs  float64 `json:"link_rtt_ms"`
	Reps       int     `json:"reps"`
	// Sums over the repetitions (records.E11Row).
	Sent             int `json:"sent"`
	Acknowledged     int `json:"acknowledged"`
	Delivered        int `json:"delivered"`
	Lost             int `json:"lost"`
	Duplicated       int `json:"duplicated"`
	UnackedDelivered int `json:"unacked_delivered"`
	// Recovered: repetitions in which the publisher published again after
	// the kill (an acknowledged message sent after it).
	Recovered         int            `json:"recovered"`
	RecoverS          stats.Interval `json:"recover_s"`
	GapS              stats.Interval `json:"gap_s"`
	Reconnects0RTT    int            `json:"reconnects_0rtt"`
	ReconnectsResumed int            `json:"reconnects_resumed"`
	Reconnects        int            `json:"reconnects"`
	NATSVersion       string         `json:"nats_version"`
}

// failoverResults reads DIR/cells/*/rep-*/e11.csv, one FailoverResult per
// cell in cell order; nil when there are none.
func failoverResults(dir string, seed uint64, resamples int) []*FailoverResult {
	files, _ := filepath.Glob(filepath.Join(dir, "cells", "*", "rep-*", records.FileE11))
	slices.Sort(files)
	byCell := map[string]*FailoverResult{}
	rec, gap := map[string][]float64{}, map[string][]float64{}
	for _, f := range files {
		rows, _, err := records.ReadFile[records.E11Row](f)
		if err != nil {
			continue
		}
		for _, r := range rows {
			fr := byCell[r.Cell]
			if fr == nil {
				fr = &FailoverResult{Cell: r.Cell, Experiment: r.Experiment, Profile: r.Profile, LossPct: r.LossPct,
					Transport: r.Transport, LinkRTTMs: float64(r.LinkRTTNs) / 1e6, NATSVersion: r.NATSVersion}
				byCell[r.Cell] = fr
			}
			fr.Reps++
			fr.Sent += r.Sent
			fr.Acknowledged += r.Acknowledged
			fr.Delivered += r.Delivered
			fr.Lost += r.Lost
			fr.Duplicated += r.Duplicated
			fr.UnackedDelivered += r.UnackedDelivered
			fr.Reconnects0RTT += r.Reconnects0RTT
			fr.ReconnectsResumed += r.ReconnectsResumed
			fr.Reconnects += max(0, r.Connections-1)
			if r.RecoverNs > 0 {
				fr.Recovered++
				rec[r.Cell] = append(rec[r.Cell], float64(r.RecoverNs)/1e9)
			}
			if r.GapNs > 0 {
				gap[r.Cell] = append(gap[r.Cell], float64(r.GapNs)/1e9)
			}
		}
	}
	var out []*FailoverResult
	opts := stats.BootstrapOptions{Seed: seed, Resamples: resamples}
	mean := func(s [][]float64) float64 { return stats.Mean(s[0]) }
	for _, fr := range byCell {
		fr.RecoverS = stats.Bootstrap([][]float64{rec[fr.Cell]}, mean, opts)
		fr.GapS = stats.Bootstrap([][]float64{gap[fr.Cell]}, mean, opts)
		out = append(out, fr)
	}
	slices.SortFunc(out, func(a, b *FailoverResult) int {
		if c := cmpStrings(a.Experiment, b.Experiment); c != 0 {
			return c
		}
		return cmpStrings(a.Cell, b.Cell)
	})
	return out
}

func cmpStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// failoverTable is the E11 table, one row per cell.
func failoverTable(s *Summary) tab {
	t := tab{id: "failover", title: "Failover behind a three-node cluster (E11)",
		intro: "One row per cell of pattern failover: a QoS 1 stream from the publisher behind the emulated link to a " +
			"three-node NATS cluster (JetStream, MQTT listener per node), the node the publisher was on killed (SIGKILL) half-way. " +
			"quic: MQTT over QUIC through two iotq gateway instances sharing ticket keys (client_hash over two nodes; a reconnection reaches the other instance); mqtts: MQTT over TCP+TLS straight to a node, " +
			"the publisher trying the other node next. Counts summed over the repetitions: lost = acknowledged but never delivered " +
			"(must be 0); duplicated = receipts beyond a message's first; unacked delivered = in flight at the kill, delivered, " +
			"never acknowledged. recover = kill to the first acknowledgement of a message sent after it; gap = the subscriber's " +
			"last receipt before the kill to its first receipt of a message sent after it; both in s, mean over the repetitions " +
			"with a 95 % percentile bootstrap interval (repetitions resampled). 0-RTT / resumed: reconnections that used QUIC " +
			"0-RTT or TLS resumption.",
		head: []string{"experiment", "profile", "loss %", "link RTT ms", "transport", "reps", "sent", "acknowledged", "lost",
			"duplicated", "unacked delivered", "recovered", "recover mean", "recover CI low", "recover CI high",
			"gap mean", "gap CI low", "gap CI high", "reconnects", "0-RTT", "resumed"}}
	for _, f := range s.Failover {
		t.rows = append(t.rows, []string{f.Experiment, f.Profile, loss(f.LossPct), fmtF(f.LinkRTTMs, 1), f.Transport,
			strconv.Itoa(f.Reps), strconv.Itoa(f.Sent), strconv.Itoa(f.Acknowledged), strconv.Itoa(f.Lost),
			strconv.Itoa(f.Duplicated), strconv.Itoa(f.UnackedDelivered), strconv.Itoa(f.Recovered),
			fmtF(f.RecoverS.Estimate, 3), fmtF(f.RecoverS.Lo, 3), fmtF(f.RecoverS.Hi, 3),
			fmtF(f.GapS.Estimate, 3), fmtF(f.GapS.Lo, 3), fmtF(f.GapS.Hi, 3),
			strconv.Itoa(f.Reconnects), strconv.Itoa(f.Reconnects0RTT), strconv.Itoa(f.ReconnectsResumed)})
	}
	return t
}

// failoverFigure draws the time to recover and the delivery gap per
// configuration (profile, loss) and transport, means with their bootstrap
// intervals.
func failoverFigure(s *Summary, save func(*plot.Plot, Figure) error) error {
	if len(s.Failover) == 0 {
		return nil
	}
	confs, trs := lossConfsAndTransports(s.Failover,
		func(f *FailoverResult) lossConf { return lossConf{f.Profile, f.LossPct} },
		func(f *FailoverResult) string { return f.Transport })
	for _, m := range []struct {
		name, label string
		val         func(*FailoverResult) stats.Interval
	}{
		{"failover-recover", "time to recover (s)", func(f *FailoverResult) stats.Interval { return f.RecoverS }},
		{"failover-gap", "delivery gap (s)", func(f *FailoverResult) stats.Interval { return f.GapS }},
	} {
		p := figplot.New("E11: "+m.label+" after a node is killed", "profile, loss", m.label)
		series := make([]figplot.EstimateSeries, len(trs))
		for i, tr := range trs {
			series[i] = figplot.EstimateSeries{Name: transportLabel(tr), Color: transportColor(tr, trs)}
			for j, c := range confs {
				for _, f := range s.Failover {
					if f.Transport == tr && f.Profile == c.name && f.LossPct == c.loss {
						iv := m.val(f)
						series[i].Points = append(series[i].Points, figplot.Estimate{Cat: j, Est: iv.Estimate, Lo: iv.Lo, Hi: iv.Hi})
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
			return fmt.Errorf("failover figure: %w", err)
		}
		if drawn == 0 {
			continue
		}
		if err := save(p, Figure{Name: m.name, Title: "E11: " + m.label,
			Caption: "Per configuration and transport, the mean over the repetitions with its 95 % percentile bootstrap interval " +
				"(no bar: one repetition). recover = kill to the first acknowledgement of a message sent after it; gap = the " +
				"subscriber's last receipt before the kill to its first receipt of a message sent after it."}); err != nil {
			return err
		}
	}
	return nil
}
