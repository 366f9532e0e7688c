package report

import (
	"sort"
	"strconv"
	"strings"

	"github.com/iotq/iotq/internal/stats"
	"github.com/iotq/iotq/records"
)

// ExperimentSummary is one row of the per-experiment table (the closing
// table of a campaign): TCP+TLS and QUIC side by side over the cells of one
// experiment and protocol. Start names a pattern B start that has rows of
// its own (reconnect-early; a QUIC broker 0-RTT policy other than hold);
// "" is every other cell of the experiment.
type ExperimentSummary struct {
	Experiment string      `json:"experiment"`
	Protocol   string      `json:"protocol"`
	Start      string      `json:"start,omitempty"`
	TCP        SideSummary `json:"tcp"`
	QUIC       SideSummary `json:"quic"`
	// Xi is the median over the experiment's configurations of the
	// completion ratio of the means (pattern A); XiN counts them.
	Xi  float64 `json:"xi"`
	XiN int     `json:"xi_configurations"`
}

// SideSummary aggregates one transport's cells of an experiment row: each
// figure is taken per cell first (a cell is one configuration), then over
// the cells, so a long cell does not outweigh a short one.
type SideSummary struct {
	Transport string `json:"transport"`
	Cells     int    `json:"cells"`
	// DelayMeanMs and DelayRSD are the means over the cells of each cell's
	// mean one-way delay and RSD.
	DelayMeanMs float64 `json:"delay_mean_ms"`
	DelayRSD    float64 `json:"delay_rsd"`
	// StartupMs and StartupRatio are the medians over the pattern B cells
	// of each cell's median start-up latency and of its ratio to the bound.
	StartupMs    float64 `json:"startup_median_ms"`
	StartupRatio float64 `json:"startup_ratio"`
}

// startLabel names the pattern B start a cell belongs to in the
// per-experiment table ("" for the experiment's main row).
func startLabel(c *CellResult) string {
	label := ""
	if c.Pattern == records.PatternReconnectEarly {
		label = c.Pattern
	}
	if isQUIC(c.Transport) && c.QUIC0RTT != "" && c.QUIC0RTT != string(records.EarlyHold) {
		if label != "" {
			label += ", "
		}
		label += "broker 0-RTT " + c.QUIC0RTT
	}
	if l := c.streamsLabel(); l != "" {
		if label != "" {
			label += ", "
		}
		label += "QUIC streams " + l
	}
	return label
}

// experimentSummaries builds the per-experiment table from the cells and
// the completion ratios.
func experimentSummaries(cells []*CellResult, xi []*XiResult) []*ExperimentSummary {
	type rowKey struct{ exp, proto, start string }
	type side struct {
		transport              string
		cells                  int
		delay, rsd, up, ratios []float64
	}
	type row struct {
		tcp, quic side
	}
	rows := map[rowKey]*row{}
	var order []rowKey
	for _, c := range cells { // sorted: experiment, profile, loss, ..., TCP before QUIC
		k := rowKey{c.Experiment, records.ProtocolOr(c.protocol), startLabel(c)}
		r := rows[k]
		if r == nil {
			r = &row{}
			rows[k] = r
			order = append(order, k)
		}
		s := &r.tcp
		if isQUIC(c.Transport) {
			s = &r.quic
		}
		if s.transport == "" {
			s.transport = c.Transport
		} else if s.transport != c.Transport {
			s.transport += "/" + c.Transport
		}
		s.cells++
		if c.DelayMs.N > 0 {
			s.delay = append(s.delay, c.DelayMs.Mean)
			if finite(c.DelayMs.RSD) {
				s.rsd = append(s.rsd, c.DelayMs.RSD)
			}
		}
		if c.Kind == KindB && c.StartupMs.N > 0 {
			s.up = append(s.up, c.StartupMs.Median)
			if finite(c.StartupRatio) {
				s.ratios = append(s.ratios, c.StartupRatio)
			}
		}
	}
	xis := map[string][]float64{}
	for _, x := range xi {
		if finite(x.OfMeans.Estimate) {
			xis[x.Experiment] = append(xis[x.Experiment], x.OfMeans.Estimate)
		}
	}
	sum := func(s side) SideSummary {
		return SideSummary{Transport: s.transport, Cells: s.cells, DelayMeanMs: meanOf(s.delay), DelayRSD: meanOf(s.rsd),
			StartupMs: medianOf(s.up), StartupRatio: medianOf(s.ratios)}
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if a.exp != b.exp {
			return a.exp < b.exp
		}
		if a.proto != b.proto {
			return a.proto < b.proto
		}
		return a.start < b.start
	})
	var out []*ExperimentSummary
	for _, k := range order {
		r := rows[k]
		tcp := r.tcp
		if tcp.cells == 0 && k.start != "" {
			// a QUIC-only start (a broker policy): next to the TCP cells of
			// the same start without the policy
			base := ""
			if strings.HasPrefix(k.start, records.PatternReconnectEarly) {
				base = records.PatternReconnectEarly
			}
			if b := rows[rowKey{k.exp, k.proto, base}]; b != nil {
				tcp = b.tcp
			}
		}
		e := &ExperimentSummary{Experiment: k.exp, Protocol: k.proto, Start: k.start, TCP: sum(tcp), QUIC: sum(r.quic), Xi: nan()}
		if k.start == "" {
			e.XiN = len(xis[k.exp])
			e.Xi = medianOf(xis[k.exp])
		}
		out = append(out, e)
	}
	return out
}

func meanOf(v []float64) float64 {
	if len(v) == 0 {
		return nan()
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return nan()
	}
	return stats.Summarize(v).Median
}

// glanceTable renders the per-experiment table.
func glanceTable(s *Summary) tab {
	t := tab{id: "experiments", title: "Per experiment: TCP+TLS vs QUIC",
		intro: "One row per experiment (and pattern B start: reconnect-early, a broker 0-RTT policy other than hold). " +
			"Each figure is taken per cell, then over the experiment's cells: delay = mean of the cells' mean one-way delays (ms), " +
			"RSD = mean of their RSDs; startup = median of the pattern B cells' median start-up latencies (ms), " +
			"startup/bound = median of their ratios to the physical bound; xi = median over the configurations of " +
			"T_QUIC / T_TCP of the means (pattern A). The per-cell tables below have the details.",
		head: []string{"experiment", "protocol", "start", "TCP", "QUIC", "cells TCP", "cells QUIC", "delay TCP", "delay QUIC",
			"RSD % TCP", "RSD % QUIC", "startup TCP", "startup QUIC", "startup/bound TCP", "startup/bound QUIC", "xi", "xi configs"}}
	for _, e := range s.Experiments {
		xiN := ""
		if e.XiN > 0 {
			xiN = strconv.Itoa(e.XiN)
		}
		t.rows = append(t.rows, []string{e.Experiment, e.Protocol, e.Start, e.TCP.Transport, e.QUIC.Transport,
			strconv.Itoa(e.TCP.Cells), strconv.Itoa(e.QUIC.Cells), fmtF(e.TCP.DelayMeanMs, 3), fmtF(e.QUIC.DelayMeanMs, 3),
			pct(e.TCP.DelayRSD, 2), pct(e.QUIC.DelayRSD, 2), fmtF(e.TCP.StartupMs, 3), fmtF(e.QUIC.StartupMs, 3),
			fmtF(e.TCP.StartupRatio, 2), fmtF(e.QUIC.StartupRatio, 2), fmtF(e.Xi, 4), xiN})
	}
	return t
}
