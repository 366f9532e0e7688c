package main

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// readCSV returns the rows of a CSV file as maps keyed by its header.
func readCSV(name string) ([]map[string]string, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	header, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: header: %w", name, err)
	}
	var rows []map[string]string
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		row := map[string]string{}
		for i, h := range header {
			row[h] = rec[i]
		}
		rows = append(rows, row)
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func num(row map[string]string, key string) float64 {
	v, _ := strconv.ParseFloat(row[key], 64)
	return v
}

// Cell is one (scenario, broker) line of the summary.
type Cell struct {
	Scenario   string  `json:"scenario"`
	Broker     string  `json:"broker"`
	Runs       int     `json:"runs"`
	MsgsPerSec float64 `json:"msgs_per_sec_median"`
	MinRate    float64 `json:"msgs_per_sec_min"`
	MaxRate    float64 `json:"msgs_per_sec_max"`
	Ratio      float64 `json:"ratio_of_medians_to_mosquitto"`
	PairRatio  float64 `json:"median_of_per_round_ratios"`
	P50us      float64 `json:"p50_us_median"`
	P99us      float64 `json:"p99_us_median"`
	LostPct    float64 `json:"lost_pct_max"`
	PeakRSSMB  float64 `json:"peak_rss_mb_median"`
	CPUus      float64 `json:"broker_cpu_us_per_msg_median"`
	CPURatio   float64 `json:"cpu_per_msg_ratio_to_mosquitto"`
}

// IdleCell is one broker's line of the idle-memory summary.
type IdleCell struct {
	Broker        string  `json:"broker"`
	Runs          int     `json:"runs"`
	Conns         int     `json:"connections"`
	BeforeMB      float64 `json:"rss_before_mb_median"`
	ConnectedMB   float64 `json:"rss_connected_mb_median"`
	KBPerConn     float64 `json:"kib_per_connection_median"`
	AfterCloseMB  float64 `json:"rss_after_close_mb_median"`
	KBPerConnList []float64
}

func cmdSummarize(args []string) error {
	fs := flag.NewFlagSet("summarize", flag.ContinueOnError)
	dir := fs.String("dir", "", "results directory holding runs.csv (and idle.csv)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var cells []Cell
	if rows, err := readCSV(filepath.Join(*dir, "runs.csv")); err == nil {
		cells = summarizeRuns(rows)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var idle []IdleCell
	if rows, err := readCSV(filepath.Join(*dir, "idle.csv")); err == nil {
		idle = summarizeIdle(rows)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var md strings.Builder
	if len(cells) > 0 {
		md.WriteString("| scenario | broker | runs | delivered msg/s, median (min-max) | x Mosquitto (median of per-round ratios) | p50 / p99 latency µs (paced runs only) | lost % (max) | peak RSS MiB | broker CPU µs per delivered msg, median (x Mosquitto) |\n")
		md.WriteString("|---|---|---|---|---|---|---|---|---|\n")
		for _, c := range cells {
			ratio := "1"
			if c.Broker != "mosquitto" {
				ratio = fmt.Sprintf("%.2f", c.PairRatio)
			}
			// Saturated runs: the latency is mostly the publisher's own
			// queue (mosquitto_pub reads faster than it sends); see runs.csv.
			lat := "-"
			if strings.HasPrefix(c.Scenario, "lat-") {
				lat = fmt.Sprintf("%.0f / %.0f", c.P50us, c.P99us)
				ratio = "(paced)"
			}
			cpu := fmt.Sprintf("%.1f", c.CPUus)
			if c.Broker != "mosquitto" && c.CPURatio > 0 {
				cpu += fmt.Sprintf(" (%.2f)", c.CPURatio)
			}
			fmt.Fprintf(&md, "| %s | %s | %d | %.1fk (%.1fk-%.1fk) | %s | %s | %.2f | %.1f | %s |\n",
				c.Scenario, c.Broker, c.Runs, c.MsgsPerSec/1e3, c.MinRate/1e3, c.MaxRate/1e3, ratio,
				lat, c.LostPct, c.PeakRSSMB, cpu)
		}
	}
	if len(idle) > 0 {
		md.WriteString("\n| broker | idle TCP connections | RSS before MiB | RSS connected MiB | KiB per connection (median) | RSS after close MiB |\n")
		md.WriteString("|---|---|---|---|---|---|\n")
		for _, c := range idle {
			fmt.Fprintf(&md, "| %s | %d | %.1f | %.1f | %.2f | %.1f |\n", c.Broker, c.Conns, c.BeforeMB, c.ConnectedMB, c.KBPerConn, c.AfterCloseMB)
		}
	}
	if err := os.WriteFile(filepath.Join(*dir, "summary.md"), []byte(md.String()), 0o644); err != nil {
		return err
	}
	js, err := json.MarshalIndent(map[string]any{"throughput": cells, "idle_memory": idle}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*dir, "summary.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	var sc strings.Builder
	sc.WriteString("scenario,broker,runs,msgs_per_sec_median,msgs_per_sec_min,msgs_per_sec_max,ratio_of_medians,median_round_ratio,p50_us,p99_us,lost_pct_max,peak_rss_mb,cpu_us_per_msg,cpu_ratio\n")
	for _, c := range cells {
		fmt.Fprintf(&sc, "%s,%s,%d,%.0f,%.0f,%.0f,%.3f,%.3f,%.0f,%.0f,%.3f,%.1f,%.2f,%.3f\n", c.Scenario, c.Broker, c.Runs,
			c.MsgsPerSec, c.MinRate, c.MaxRate, c.Ratio, c.PairRatio, c.P50us, c.P99us, c.LostPct, c.PeakRSSMB, c.CPUus, c.CPURatio)
	}
	if err := os.WriteFile(filepath.Join(*dir, "summary.csv"), []byte(sc.String()), 0o644); err != nil {
		return err
	}
	fmt.Print(md.String())
	return nil
}

func summarizeRuns(rows []map[string]string) []Cell {
	type key struct{ scenario, broker string }
	var order []key
	groups := map[key][]map[string]string{}
	for _, r := range rows {
		k := key{r["scenario"], r["broker"]}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	col := func(rs []map[string]string, name string) []float64 {
		var out []float64
		for _, r := range rs {
			out = append(out, num(r, name))
		}
		return out
	}
	var cells []Cell
	mosq := map[string]float64{}
	mosqCPU := map[string]float64{}
	for _, k := range order {
		rs := groups[k]
		rates := col(rs, "msgs_per_s")
		c := Cell{
			Scenario: k.scenario, Broker: k.broker, Runs: len(rs),
			MsgsPerSec: median(rates), MinRate: slices.Min(rates), MaxRate: slices.Max(rates),
			P50us: median(col(rs, "p50_us")), P99us: median(col(rs, "p99_us")),
			LostPct: slices.Max(col(rs, "lost_pct")), PeakRSSMB: median(col(rs, "peak_rss_kb")) / 1024,
			CPUus: median(col(rs, "cpu_us_per_msg")),
		}
		if k.broker == "mosquitto" {
			mosq[k.scenario] = c.MsgsPerSec
			mosqCPU[k.scenario] = c.CPUus
		}
		cells = append(cells, c)
	}
	// Paired ratios: each run against Mosquitto's run of the same round
	// (adjacent in time), which cancels much of the drift of a shared machine.
	type rk struct{ scenario, round string }
	mosqRound := map[rk]float64{}
	for _, r := range rows {
		if r["broker"] == "mosquitto" {
			mosqRound[rk{r["scenario"], r["round"]}] = num(r, "msgs_per_s")
		}
	}
	for i := range cells {
		c := &cells[i]
		if m := mosq[c.Scenario]; m > 0 {
			c.Ratio = c.MsgsPerSec / m
		}
		if m := mosqCPU[c.Scenario]; m > 0 {
			c.CPURatio = c.CPUus / m
		}
		var pr []float64
		for _, r := range groups[key{c.Scenario, c.Broker}] {
			if m := mosqRound[rk{c.Scenario, r["round"]}]; m > 0 {
				pr = append(pr, num(r, "msgs_per_s")/m)
			}
		}
		c.PairRatio = median(pr)
	}
	slices.SortStableFunc(cells, func(a, b Cell) int { return strings.Compare(a.Scenario, b.Scenario) })
	return cells
}

func summarizeIdle(rows []map[string]string) []IdleCell {
	var order []string
	groups := map[string][]map[string]string{}
	for _, r := range rows {
		if _, ok := groups[r["broker"]]; !ok {
			order = append(order, r["broker"])
		}
		groups[r["broker"]] = append(groups[r["broker"]], r)
	}
	var out []IdleCell
	for _, b := range order {
		rs := groups[b]
		var before, conn, after, per []float64
		n := 0
		for _, r := range rs {
			n = int(num(r, "n"))
			before = append(before, num(r, "rss_before_kb"))
			conn = append(conn, num(r, "rss_connected_kb"))
			after = append(after, num(r, "rss_after_close_kb"))
			per = append(per, (num(r, "rss_connected_kb")-num(r, "rss_before_kb"))/num(r, "n"))
		}
		out = append(out, IdleCell{
			Broker: b, Runs: len(rs), Conns: n,
			BeforeMB: median(before) / 1024, ConnectedMB: median(conn) / 1024,
			KBPerConn: median(per), AfterCloseMB: median(after) / 1024, KBPerConnList: per,
		})
	}
	return out
}
