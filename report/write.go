package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/iotq/iotq/records"
)

// fmtF formats v with prec decimals; NaN and Inf become empty.
func fmtF(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return ""
	}
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if s == "-0" || strings.Trim(s, "-0.") == "" && strings.HasPrefix(s, "-") {
		s = strings.TrimPrefix(s, "-")
	}
	return s
}

func pct(v float64, prec int) string { return fmtF(v*100, prec) }

func loss(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// tab is a table rendered to Markdown and HTML alike.
type tab struct {
	id, title string
	intro     string
	head      []string
	rows      [][]string
}

func tables(s *Summary) []tab {
	out := []tab{comparisonTable(s), glanceTable(s), comparison(s)}
	delay := tab{id: "delay", title: "One-way delay and delivery per cell",
		intro: "Delays in ms over the distinct messages received (all repetitions). bound = physical lower bound " +
			"(propagation + serialization). Percentiles by linear interpolation (type 7).",
		head: []string{"cell", "experiment", "profile", "loss %", "transport", "QoS", "pattern", "n", "published",
			"delivery", "mean", "median", "p5", "p95", "RSD %", "bound", "startup median"}}
	for _, c := range s.Cells {
		if c.Published == 0 && c.DelayMs.N == 0 {
			continue
		}
		delay.rows = append(delay.rows, []string{c.Cell, c.Experiment, c.Profile, loss(c.LossPct), c.transportName(),
			strconv.Itoa(c.QoS), c.Pattern, strconv.Itoa(c.DelayMs.N), strconv.Itoa(c.Published), fmtF(c.DeliveryRatio, 4),
			fmtF(c.DelayMs.Mean, 3), fmtF(c.DelayMs.Median, 3), fmtF(c.DelayMs.P5, 3), fmtF(c.DelayMs.P95, 3),
			pct(c.DelayMs.RSD, 2), fmtF(c.DelayBoundMs, 3), fmtF(c.StartupMs.Median, 3)})
	}
	out = append(out, delay)

	st := tab{id: "startup", title: "Startup latency (pattern B)",
		intro: "From the dial start of the publisher's second connection to the subscriber's receipt of the message " +
			"sent on it, in ms, one value per repetition. Pattern reconnect-early writes that PUBLISH with CONNECT " +
			"(QUIC: in the 0-RTT flight); broker 0-RTT = the broker's policy for it (hold: processed once the handshake " +
			"completed; accept: at once). bound = RTTs x the publisher link's round trip + the message's one-way bound " +
			"(propagation + serialization); RTTs = round trips the protocol needs before the broker can process the " +
			"PUBLISH; ratio = median / bound.",
		head: []string{"cell", "profile", "loss %", "transport", "pattern", "broker 0-RTT", "n", "resumed", "0-RTT", "mean", "median", "p5", "p95", "RSD %", "bound", "RTTs", "ratio"}}
	for _, c := range s.Cells {
		if c.Kind != KindB {
			continue
		}
		st.rows = append(st.rows, []string{c.Cell, c.Profile, loss(c.LossPct), c.transportName(), c.Pattern, c.QUIC0RTT, strconv.Itoa(c.StartupMs.N),
			strconv.Itoa(c.Resumed), strconv.Itoa(c.ZeroRTT), fmtF(c.StartupMs.Mean, 3), fmtF(c.StartupMs.Median, 3),
			fmtF(c.StartupMs.P5, 3), fmtF(c.StartupMs.P95, 3), pct(c.StartupMs.RSD, 2), fmtF(c.StartupBoundMs, 3),
			fmtF(c.StartupBoundRTTs, 0), fmtF(c.StartupRatio, 2)})
	}
	out = append(out, st)

	ct := tab{id: "completion", title: "Completion time (pattern A)",
		intro: "T = first publish to last receipt of a repetition, in s, over the repetitions in which every message arrived (incomplete ones are counted, not averaged).",
		head:  []string{"cell", "profile", "loss %", "transport", "QoS", "reps", "incomplete", "mean", "median", "p5", "p95", "RSD %"}}
	for _, c := range s.Cells {
		if c.Kind != KindA {
			continue
		}
		ct.rows = append(ct.rows, []string{c.Cell, c.Profile, loss(c.LossPct), c.transportName(), strconv.Itoa(c.QoS),
			strconv.Itoa(c.CompletionS.N), strconv.Itoa(c.Incomplete), fmtF(c.CompletionS.Mean, 3), fmtF(c.CompletionS.Median, 3),
			fmtF(c.CompletionS.P5, 3), fmtF(c.CompletionS.P95, 3), pct(c.CompletionS.RSD, 2)})
	}
	out = append(out, ct)
	out = append(out, batchTable(s), protocolTable(s))
	out = append(out, failoverTable(s))   // E11: report/e11.go
	out = append(out, pathChangeTable(s)) // E10: report/e10.go
	// E9: report/e9.go
	out = append(out, holComparisonTable(s), holTable(s))

	xt := tab{id: "xi", title: "Completion ratio xi = T_QUIC / T_TCP",
		intro: "Per repetition (repetitions paired by number) and of the means, with a percentile bootstrap " +
			"confidence interval (the two samples resampled independently; seed and resamples in the columns).",
		head: []string{"experiment", "profile", "loss %", "QoS", "variant", "TCP transport", "pairs", "xi median per rep", "xi p5", "xi p95",
			"xi of means", "CI low", "CI high", "level", "resamples", "seed"}}
	for _, x := range s.Xi {
		xt.rows = append(xt.rows, []string{x.Experiment, x.Profile, loss(x.LossPct), strconv.Itoa(x.QoS), x.Variant, x.TCP, strconv.Itoa(x.Pairs),
			fmtF(x.PerRep.Median, 4), fmtF(x.PerRep.P5, 4), fmtF(x.PerRep.P95, 4), fmtF(x.OfMeans.Estimate, 4),
			fmtF(x.OfMeans.Lo, 4), fmtF(x.OfMeans.Hi, 4), fmtF(x.OfMeans.Level, 2), strconv.Itoa(x.OfMeans.Resamples),
			strconv.FormatUint(x.OfMeans.Seed, 10)})
	}
	out = append(out, xt)

	wt := tab{id: "wire", title: "Packets and bytes on the publisher's link",
		intro: "All repetitions, from links.csv. sent = packets the publisher sent into its link (lost ones included: what the device itself sends, as the testbed counted); received = packets that reached the publisher (sent towards it minus the link's drops); packets, bytes and drops count both directions. window = sum over repetitions of the publisher's first dial start (else first send) to the last receipt.",
		head:  []string{"cell", "profile", "loss %", "transport", "QoS", "sent", "received", "sent/s", "received/s", "packets", "bytes", "drops", "window s", "packets/s", "bytes/delivered msg"}}
	for _, c := range s.Cells {
		if !c.hasLinks {
			continue
		}
		wt.rows = append(wt.rows, []string{c.Cell, c.Profile, loss(c.LossPct), c.transportName(), strconv.Itoa(c.QoS),
			strconv.FormatInt(c.PacketsSent, 10), strconv.FormatInt(c.PacketsReceived, 10),
			fmtF(c.PacketsSentPerSecond, 3), fmtF(c.PacketsReceivedPerSecond, 3),
			strconv.FormatInt(c.Packets, 10), strconv.FormatInt(c.Bytes, 10), strconv.FormatInt(c.Drops, 10),
			fmtF(c.WindowS, 3), fmtF(c.PacketsPerSecond, 3), fmtF(c.BytesPerMessage, 1)})
	}
	out = append(out, wt)

	cpuT := tab{id: "cpu", title: "CPU time of the publisher",
		intro: "User + system CPU time of the publisher's processes (cpu.csv, rusage), all repetitions, on its own: measured, no model. " +
			"ms/delivered msg divides it by the distinct messages received.",
		head: []string{"cell", "profile", "loss %", "transport", "QoS", "size", "interval", "CPU s", "CPU ms/delivered msg"}}
	for _, c := range s.Cells {
		if !finite(c.CPUSeconds) {
			continue
		}
		cpuT.rows = append(cpuT.rows, []string{c.Cell, c.Profile, loss(c.LossPct), c.transportName(), strconv.Itoa(c.QoS), strconv.Itoa(c.Size),
			time.Duration(c.IntervalNs).String(), fmtF(c.CPUSeconds, 4), fmtF(c.CPUMsPerMessage, 4)})
	}
	out = append(out, cpuT)

	et := tab{id: "energy", title: "Energy estimate of the publisher",
		intro: "The testbed measured the whole board's power with a meter; this lab has no meter, so it estimates the same whole-device figure " +
			"with a model: device = base power x window + CPU time x active power + radio energy, each part below. " +
			"Radio energy from the power-state model driven by the packet timeline (source column); " +
			"processor energy = CPU time x active power; base = the board's base power over the window (parameters and their sources below). " +
			"traffic J = radio + CPU, what the publishing itself costs. measured = external power log integrated over the cell's repetitions.",
		head: []string{"cell", "technology", "radio J", "promotion J", "active J", "tail J", "idle J", "CPU s", "CPU J", "traffic J",
			"mJ/delivered msg", "traffic mean W", "base J", "device J", "device mean W", "measured J", "measured W", "radio source"}}
	for _, c := range s.Cells {
		e := c.Energy
		if e == nil {
			continue
		}
		et.rows = append(et.rows, []string{c.Cell, e.Technology, fmtF(e.Radio.TotalJ, 4), fmtF(e.Radio.PromotionJ, 4),
			fmtF(e.Radio.ActiveJ, 4), fmtF(e.Radio.TailJ, 4), fmtF(e.Radio.IdleJ, 4), fmtF(e.CPUSeconds, 4), fmtF(e.CPUJ, 4),
			fmtF(e.TotalJ, 4), fmtF(e.PerMessageJ*1000, 3), fmtF(e.MeanW, 4), fmtF(e.BaseJ, 4), fmtF(e.DeviceJ, 4), fmtF(e.DeviceMeanW, 4),
			fmtF(e.MeasuredJ, 4), fmtF(e.MeasuredW, 4), e.RadioSource})
	}
	out = append(out, et)

	pt := tab{id: "energy-parameters", title: "Energy model parameters",
		intro: "Powers in W, times in s, alpha in W per Mbit/s. Built-in idle power (Huang et al. rows) = DRX (LTE) or beacon (WiFi) power x on time / period; the satellite defaults are placeholders to replace with a terminal's data sheet values.",
		head:  []string{"technology", "promotion W", "promotion s", "base W (beta)", "alpha up", "alpha down", "tail W", "tail s", "idle W", "source"}}
	for _, k := range sortedKeys(s.EnergyModels) {
		m := s.EnergyModels[k]
		pt.rows = append(pt.rows, []string{k, fmtF(m.PromotionW, 4), fmtF(m.PromotionS, 4), fmtF(m.BaseW, 5), fmtF(m.UpWPerMbps, 5),
			fmtF(m.DownWPerMbps, 5), fmtF(m.TailW, 4), fmtF(m.TailS, 4), fmtF(m.IdleW, 5), m.Source})
	}
	for _, k := range sortedKeys(s.CPUWatts) {
		name := "processor"
		if k != "" {
			name = k + "/processor"
		}
		pt.rows = append(pt.rows, []string{name, "", "", fmtF(s.CPUWatts[k], 3), "", "", "", "", "", "active power x CPU time (manifest or --cpu-watts; default 2 W)"})
	}
	for _, k := range sortedKeys(s.BoardBase) {
		name := "board (base)"
		if k != "" {
			name = k + "/board (base)"
		}
		b := s.BoardBase[k]
		pt.rows = append(pt.rows, []string{name, "", "", fmtF(b.W, 3), "", "", "", "", "", "whole-device model's base power x window: " + b.Source})
	}
	out = append(out, pt)
	return out
}

// comparison is the main table: one row per configuration, TCP next to
// QUIC.
func comparison(s *Summary) tab {
	t := tab{id: "comparison", title: "TCP+TLS vs QUIC",
		intro: "One row per configuration (the other tables have the details). Delay and startup latency in ms " +
			"(mean delay, median startup), completion time T in s (mean over complete repetitions); startup/bound = " +
			"median startup latency divided by its physical bound (1 = as fast as the protocol allows on the link). " +
			"A QUIC cell whose broker ran another 0-RTT policy than hold gets a row of its own, next to the same TCP cell. " +
			"cut % = 100 x (1 - QUIC/TCP) of the mean delay (or the median start-up latency, pattern B) with its 95 % percentile " +
			"bootstrap interval over the configuration's own messages (repetitions), the two cells resampled independently; " +
			"\"no difference\" where it includes 0.",
		head: []string{"experiment", "profile", "loss %", "QoS", "pattern", "variant", "TCP", "QUIC",
			"delay TCP", "delay QUIC", "RSD % TCP", "RSD % QUIC", "delivery TCP", "delivery QUIC",
			"startup TCP", "startup QUIC", "startup/bound TCP", "startup/bound QUIC", "T TCP", "T QUIC", "cut % (95 % CI)", "verdict"}}
	per := map[[2]string]*Comparison{}
	for _, c := range s.PerConfiguration {
		per[[2]string{c.TCPCell, c.QUICCell}] = c
	}
	get := func(c *CellResult, f func(*CellResult) string) string {
		if c == nil {
			return ""
		}
		return f(c)
	}
	for _, p := range pairCells(s.Cells) {
		c := p.key
		label := c.variantLabel()
		if q := p.quic; q != nil && q.QUIC0RTT != "" && (q.QUIC0RTT != string(records.EarlyHold) || q.Pattern == records.PatternReconnectEarly) {
			label = strings.TrimPrefix(label+", broker 0-RTT "+q.QUIC0RTT, ", ")
		}
		row := []string{c.Experiment, c.Profile, loss(c.LossPct), strconv.Itoa(c.QoS), c.Pattern, label,
			get(p.tcp, func(c *CellResult) string { return c.Transport }), get(p.quic, func(c *CellResult) string { return c.transportName() })}
		for _, f := range []func(*CellResult) string{
			func(c *CellResult) string { return fmtF(c.DelayMs.Mean, 3) },
			func(c *CellResult) string { return pct(c.DelayMs.RSD, 2) },
			func(c *CellResult) string { return fmtF(c.DeliveryRatio, 4) },
			func(c *CellResult) string { return fmtF(c.StartupMs.Median, 3) },
			func(c *CellResult) string { return fmtF(c.StartupRatio, 2) },
			func(c *CellResult) string { return fmtF(c.CompletionS.Mean, 3) },
		} {
			row = append(row, get(p.tcp, f), get(p.quic, f))
		}
		cut, verdict := "", ""
		if p.tcp != nil && p.quic != nil {
			if c := per[[2]string{p.tcp.Cell, p.quic.Cell}]; c != nil {
				cut = fmt.Sprintf("%s %s [%s, %s]", metricShort(c.Metric), fmtF(c.Estimate, 1), fmtF(c.Lo, 1), fmtF(c.Hi, 1))
				verdict = c.Verdict
			}
		}
		t.rows = append(t.rows, append(row, cut, verdict))
	}
	return t
}

// methods is the Methods section: the metric definitions of experiments.md.
var methods = []string{
	"One-way delay of a message: receive time at the subscriber minus send time at the publisher (send time is taken just before the client library is handed the message); all nodes of a run share the host clock.",
	"Mean, median, percentiles and RSD are computed over the distinct messages received in all repetitions of a cell (duplicates count once, the first receipt wins).",
	"Percentiles: linear interpolation between closest ranks (Hyndman and Fan type 7, as R and NumPy by default): h = (n-1)p, x[floor h] + (h - floor h)(x[floor h + 1] - x[floor h]).",
	"Standard deviation: sample standard deviation (divisor n-1). RSD (relative standard deviation): standard deviation / mean of the one-way delays.",
	"Delivery ratio: distinct messages received / messages published (rows of messages.csv; a message without recv_ns was not received).",
	"Completion time T (pattern A, stop-and-wait): first publish to last receipt of a repetition (completions.csv; else derived from messages.csv). Completion ratio xi = T_QUIC / T_TCP, per repetition (paired by repetition number) and of the means, with a percentile bootstrap confidence interval (2000 resamples and seed 1 unless set otherwise; math/rand/v2 PCG).",
	"Startup latency (pattern B): from the start of the second connection attempt at the publisher (dial_start_ns of its second connection in connections.csv) until the subscriber receives the first message sent on or after it (messages.csv). Whether TLS resumption or QUIC 0-RTT really happened is counted per cell.",
	"Bytes (packets) on the wire: every IP packet of the publisher's link in both directions, from the emulator's counters (links.csv), including handshakes, acknowledgements and retransmissions. Packets per second divide by the cell's window (sum over repetitions of the publisher's first dial start, else its first send, to the last receipt); bytes per delivered message divide by the distinct messages received.",
	"Physical lower bound of a message: propagation delay of the publisher and subscriber links plus serialization of the payload at each link's rate (protocol headers left out). Of an MQTT start-up (pattern B): the round trips of the publisher link the protocol needs before the broker can process the first PUBLISH, times that link's round trip, plus the message's bound. TCP+TLS 1.3: TCP 1 + TLS 1 + CONNECT/CONNACK 1 = 3 (2 with the PUBLISH written behind CONNECT, reconnect-early); QUIC with 0-RTT: CONNACK 1 (0 with the PUBLISH in the 0-RTT flight and a broker that accepts it, 1 when it holds it until the handshake completed); QUIC without 0-RTT: one more. Ratio = median start-up latency / bound. Of an AMQP start (E8): the transport's handshake round trips only (TCP+TLS 1.3: 2; QUIC: 1; 0-RTT: 0) plus the one-way path delay.",
	"Energy: radio energy from a per-technology power-state model (Huang et al., MobiSys 2012): promotion from idle, active power beta + alpha_up x uplink Mbit/s + alpha_down x downlink Mbit/s in 100 ms bins with packets, tail after the last packet, idle afterwards; driven by the publisher link's packet capture (cells/CELL/pub.pcap; the first packet's source is taken as the publisher) or, without one, by the totals of links.csv with the radio active for the whole window (an upper estimate). Processor energy = CPU time of the publisher process (cpu.csv) x active power. An external power log, when given, is integrated (trapezoid rule) over each repetition's window.",
}

func markdown(s *Summary) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# iotq report: %s\n\n", s.Source)
	b.WriteString("## Results in plain words\n\n")
	for _, l := range plainWords(s) {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	b.WriteString("\n")
	if len(s.Manifest) > 0 {
		b.WriteString("## Run\n\n| key | value |\n|---|---|\n")
		for _, k := range sortedKeys(s.Manifest) {
			fmt.Fprintf(&b, "| %s | %s |\n", mdCell(k), mdCell(s.Manifest[k]))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "Files read: %s.\n\n", strings.Join(s.Files, ", "))
	if len(s.Notes) > 0 {
		b.WriteString("## Notes\n\n")
		for _, n := range s.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
		b.WriteString("\n")
	}
	for _, t := range tables(s) {
		if len(t.rows) == 0 {
			continue // a table the data does not fill is left out, not shown empty
		}
		fmt.Fprintf(&b, "## %s\n\n%s\n\n", t.title, t.intro)
		b.WriteString("| " + strings.Join(t.head, " | ") + " |\n")
		b.WriteString("|" + strings.Repeat("---|", len(t.head)) + "\n")
		for _, r := range t.rows {
			cells := make([]string, len(r))
			for i, v := range r {
				if v == "" {
					v = "–"
				}
				cells[i] = mdCell(v)
			}
			b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
		}
		b.WriteString("\n")
	}
	if len(s.Figures) > 0 {
		b.WriteString("## Figures\n\n")
		for _, f := range s.Figures {
			fmt.Fprintf(&b, "- [%s](%s/%s.svg) ([PNG](%s/%s.png)): %s\n", f.Title, DirFigures, f.Name, DirFigures, f.Name, f.Caption)
		}
		b.WriteString("\n")
	}
	b.WriteString("## Methods\n\n")
	for _, m := range methods {
		fmt.Fprintf(&b, "- %s\n", m)
	}
	return b.Bytes(), nil
}

// mdBold turns the **bold** and `code` marks of a plain-words line into
// HTML (the line is escaped already).
func mdBold(s string) string {
	for _, m := range []struct{ mark, open, close string }{{"**", "<b>", "</b>"}, {"`", "<code>", "</code>"}} {
		parts := strings.Split(s, m.mark)
		if len(parts)%2 == 0 {
			continue // unbalanced: leave the marks
		}
		var b strings.Builder
		for i, p := range parts {
			if i > 0 {
				if i%2 == 1 {
					b.WriteString(m.open)
				} else {
					b.WriteString(m.close)
				}
			}
			b.WriteString(p)
		}
		s = b.String()
	}
	return s
}

func mdCell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\n", " "), "|", "\\|")
}

// tablesCSV writes one row per cell with every number of the report.
func tablesCSV(s *Summary) ([]byte, error) {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	head := []string{"cell", "experiment", "profile", "loss_pct", "transport", "qos", "pattern", "size", "interval_ns", "publishers", "retries", "status",
		"published", "received", "delivery_ratio",
		"delay_n", "delay_mean_ms", "delay_median_ms", "delay_p5_ms", "delay_p25_ms", "delay_p75_ms", "delay_p95_ms", "delay_sd_ms", "delay_rsd", "delay_bound_ms",
		"startup_n", "startup_mean_ms", "startup_median_ms", "startup_p5_ms", "startup_p95_ms", "startup_rsd", "startup_bound_ms", "startup_bound_rtts", "startup_ratio", "resumed", "used_0rtt", "quic_0rtt",
		"completion_n", "completion_incomplete", "completion_mean_s", "completion_median_s", "completion_p5_s", "completion_p95_s", "completion_rsd",
		"packets", "bytes", "drops", "window_s", "packets_per_s", "bytes_per_delivered_msg",
		"energy_technology", "radio_j", "cpu_s", "cpu_j", "energy_total_j", "energy_per_msg_j", "energy_mean_w", "measured_j", "radio_source",
		"packets_sent", "packets_received", "packets_sent_per_s", "packets_received_per_s",
		"publisher_cpu_s", "publisher_cpu_ms_per_msg", "base_w", "base_j", "device_j", "device_mean_w"}
	head = append(head, holCSVHead...) // E9: report/e9.go
	head = append(head, "pub_reconnects")
	if err := w.Write(head); err != nil {
		return nil, err
	}
	g := func(v float64) string { return fmtF(v, 6) }
	for _, c := range s.Cells {
		row := []string{c.Cell, c.Experiment, c.Profile, loss(c.LossPct), c.transportName(), strconv.Itoa(c.QoS), c.Pattern,
			strconv.Itoa(c.Size), strconv.FormatInt(c.IntervalNs, 10), strconv.Itoa(c.Publishers), strconv.Itoa(c.Retries),
			c.Status, strconv.Itoa(c.Published), strconv.Itoa(c.Received), g(c.DeliveryRatio),
			strconv.Itoa(c.DelayMs.N), g(c.DelayMs.Mean), g(c.DelayMs.Median), g(c.DelayMs.P5), g(c.DelayMs.P25), g(c.DelayMs.P75),
			g(c.DelayMs.P95), g(c.DelayMs.SD), g(c.DelayMs.RSD), g(c.DelayBoundMs),
			strconv.Itoa(c.StartupMs.N), g(c.StartupMs.Mean), g(c.StartupMs.Median), g(c.StartupMs.P5), g(c.StartupMs.P95),
			g(c.StartupMs.RSD), g(c.StartupBoundMs), g(c.StartupBoundRTTs), g(c.StartupRatio), strconv.Itoa(c.Resumed), strconv.Itoa(c.ZeroRTT), c.QUIC0RTT,
			strconv.Itoa(c.CompletionS.N), strconv.Itoa(c.Incomplete), g(c.CompletionS.Mean), g(c.CompletionS.Median), g(c.CompletionS.P5), g(c.CompletionS.P95), g(c.CompletionS.RSD),
		}
		if c.hasLinks {
			row = append(row, strconv.FormatInt(c.Packets, 10), strconv.FormatInt(c.Bytes, 10), strconv.FormatInt(c.Drops, 10))
		} else {
			row = append(row, "", "", "")
		}
		row = append(row, g(c.WindowS), g(c.PacketsPerSecond), g(c.BytesPerMessage))
		if e := c.Energy; e != nil {
			row = append(row, e.Technology, g(e.Radio.TotalJ), g(e.CPUSeconds), g(e.CPUJ), g(e.TotalJ), g(e.PerMessageJ), g(e.MeanW), g(e.MeasuredJ), e.RadioSource)
		} else {
			row = append(row, "", "", "", "", "", "", "", "", "")
		}
		if c.hasLinks {
			row = append(row, strconv.FormatInt(c.PacketsSent, 10), strconv.FormatInt(c.PacketsReceived, 10))
		} else {
			row = append(row, "", "")
		}
		row = append(row, g(c.PacketsSentPerSecond), g(c.PacketsReceivedPerSecond))
		row = append(row, g(c.CPUSeconds), g(c.CPUMsPerMessage))
		if e := c.Energy; e != nil {
			row = append(row, g(e.BaseW), g(e.BaseJ), g(e.DeviceJ), g(e.DeviceMeanW))
		} else {
			row = append(row, "", "", "", "")
		}
		row = append(row, holCSV(s, c.Cell, g)...)
		row = append(row, strconv.Itoa(c.PubReconnects))
		if err := w.Write(row); err != nil {
			return nil, err
		}
	}
	w.Flush()
	return b.Bytes(), w.Error()
}

func summaryJSON(s *Summary) ([]byte, error) {
	b, err := json.MarshalIndent(jsonSafe(reflect.ValueOf(s)), "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// jsonSafe converts v into maps, slices and scalars that encoding/json can
// write: NaN and Inf become null (JSON has no NaN), struct fields use their
// json tags, unexported fields are dropped.
func jsonSafe(v reflect.Value) any {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return jsonSafe(v.Elem())
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil
		}
		return f
	case reflect.Struct:
		m := map[string]any{}
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if strings.Contains(opts, "omitempty") && v.Field(i).IsZero() {
				continue
			}
			m[name] = jsonSafe(v.Field(i))
		}
		return m
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return []any{}
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = jsonSafe(v.Index(i))
		}
		return out
	case reflect.Map:
		m := map[string]any{}
		iter := v.MapRange()
		for iter.Next() {
			m[fmt.Sprint(iter.Key().Interface())] = jsonSafe(iter.Value())
		}
		return m
	}
	return v.Interface()
}

// htmlPage renders one self-contained page: styles inline, figures as
// inline SVG read from figDir, links to the PNG and SVG files next to it.
func htmlPage(s *Summary, figDir string) ([]byte, error) {
	var b bytes.Buffer
	e := html.EscapeString
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>iotq report: %s</title>\n", e(s.Source))
	b.WriteString(`<style>
body{font-family:sans-serif;margin:2em;max-width:110em;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em;font-size:0.85em}
th,td{border:1px solid #bbb;padding:0.2em 0.5em;text-align:right}
th{background:#eee}td:first-child,th:first-child{text-align:left}
figure{display:inline-block;margin:1em;vertical-align:top}
figure svg{width:36em;height:auto}
figcaption{max-width:36em;font-size:0.85em}
.notes li{color:#844}
</style>
</head>
<body>
`)
	fmt.Fprintf(&b, "<h1>iotq report: %s</h1>\n", e(s.Source))
	b.WriteString("<h2 id=\"plain\">Results in plain words</h2>\n<ul>\n")
	for _, l := range plainWords(s) {
		fmt.Fprintf(&b, "<li>%s</li>\n", mdBold(e(l)))
	}
	b.WriteString("</ul>\n")
	if len(s.Manifest) > 0 {
		b.WriteString("<h2>Run</h2>\n<table>\n")
		for _, k := range sortedKeys(s.Manifest) {
			fmt.Fprintf(&b, "<tr><th>%s</th><td>%s</td></tr>\n", e(k), e(s.Manifest[k]))
		}
		b.WriteString("</table>\n")
	}
	fmt.Fprintf(&b, "<p>Files read: %s.</p>\n", e(strings.Join(s.Files, ", ")))
	if len(s.Notes) > 0 {
		b.WriteString("<h2>Notes</h2>\n<ul class=\"notes\">\n")
		for _, n := range s.Notes {
			fmt.Fprintf(&b, "<li>%s</li>\n", e(n))
		}
		b.WriteString("</ul>\n")
	}
	if len(s.Figures) > 0 {
		b.WriteString("<h2>Figures</h2>\n")
		for _, f := range s.Figures {
			svg, err := os.ReadFile(filepath.Join(figDir, f.Name+".svg"))
			if err != nil {
				return nil, fmt.Errorf("figure %s: %w", f.Name, err)
			}
			if i := bytes.Index(svg, []byte("<svg")); i > 0 {
				svg = svg[i:]
			}
			fmt.Fprintf(&b, "<figure id=\"fig-%s\">\n%s\n<figcaption><b>%s.</b> %s <a href=\"%s/%s.png\">PNG</a> <a href=\"%s/%s.svg\">SVG</a></figcaption>\n</figure>\n",
				e(f.Name), svg, e(f.Title), e(f.Caption), DirFigures, e(f.Name), DirFigures, e(f.Name))
		}
	}
	for _, t := range tables(s) {
		if len(t.rows) == 0 {
			continue // a table the data does not fill is left out, not shown empty
		}
		fmt.Fprintf(&b, "<h2 id=\"%s\">%s</h2>\n<p>%s</p>\n", t.id, e(t.title), e(t.intro))
		b.WriteString("<table>\n<tr>")
		for _, h := range t.head {
			fmt.Fprintf(&b, "<th>%s</th>", e(h))
		}
		b.WriteString("</tr>\n")
		for _, r := range t.rows {
			b.WriteString("<tr>")
			for _, v := range r {
				if v == "" {
					v = "–"
				}
				fmt.Fprintf(&b, "<td>%s</td>", e(v))
			}
			b.WriteString("</tr>\n")
		}
		b.WriteString("</table>\n")
	}
	b.WriteString("<h2>Methods</h2>\n<ul>\n")
	for _, m := range methods {
		fmt.Fprintf(&b, "<li>%s</li>\n", e(m))
	}
	b.WriteString("</ul>\n</body>\n</html>\n")
	return b.Bytes(), nil
}
