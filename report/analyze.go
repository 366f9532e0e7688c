package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/iotq/iotq/internal/stats"
	"github.com/iotq/iotq/report/energy"
	"github.com/iotq/iotq/report/pcap"
)

// kindOf normalises a pattern name.
func kindOf(p string) string {
	p = strings.ToLower(strings.TrimSpace(p))
	switch {
	case p == "a" || strings.Contains(p, "stop") || strings.Contains(p, "wait"):
		return KindA
	case p == "b" || strings.Contains(p, "reconnect") || strings.Contains(p, "resum"):
		return KindB
	}
	return KindPeriodic
}

func isQUIC(transport string) bool { return strings.Contains(strings.ToLower(transport), "quic") }

// profileDefaults are the link profiles of experiments.md: rate and the
// delay figure of the table.
var profileDefaults = map[string]struct {
	rate    float64
	delayNs int64
}{
	"wifi":      {20e6, 25e6},
	"cellular":  {10e6, 100e6},
	"satellite": {1.5e6, 600e6},
	"ethernet":  {100e6, 0},
}

// rttExperiment reports whether an experiment's delay figure is a round
// trip and whether both links carry the profile (experiments.md).
func rttExperiment(exp string) (rtt, both bool) {
	switch strings.ToUpper(strings.TrimSpace(exp)) {
	case "E4", "E4B", "E5":
		return true, true
	case "E6":
		return true, false
	}
	return false, false
}

func nan() float64 { return math.NaN() }

// analyze computes every cell's statistics.
func analyze(ds *dataset, seed uint64, resamples int) ([]*CellResult, []*XiResult) {
	cells := map[string]*CellResult{}
	getCell := func(id string) *CellResult {
		c, ok := cells[id]
		if !ok {
			c = newCell(id)
			cells[id] = c
		}
		return c
	}
	if t := ds.cells; t != nil {
		for _, r := range t.rows {
			id := t.str(r, "cell")
			if id == "" {
				continue
			}
			c := getCell(id)
			// values from the id stay where cells.csv leaves a field empty
			set := func(dst *string, cols ...string) {
				if v := t.str(r, cols...); v != "" {
					*dst = v
				}
			}
			set(&c.Experiment, "experiment")
			set(&c.Profile, "profile")
			set(&c.Transport, "transport")
			set(&c.Pattern, "pattern")
			if v, ok := t.floatv(r, "loss_pct", "loss"); ok {
				c.LossPct = v
			}
			if q, ok := t.int64v(r, "qos"); ok {
				c.QoS = int(q)
			}
			if v, ok := t.int64v(r, "size", "payload", "payload_size"); ok {
				c.Size = int(v)
			}
			c.IntervalNs, _ = t.durationNs(r, "interval_ns", "interval")
			c.Publishers = t.intv(r, "publishers")
			c.Retries = t.intv(r, "retries")
			c.Status = t.str(r, "status")
			c.Error = t.str(r, "error")
			c.Link = linkFromRow(t, r)
		}
	}
	// messages: first receipt of each distinct (rep, seq)
	type key struct {
		rep  int
		node string // publisher node and topic: seq is unique per publisher run
		seq  int64
	}
	type msg struct {
		send, recv, delay int64
		size              int
	}
	perCell := map[string]map[key]*msg{}
	if t := ds.messages; t != nil {
		for _, r := range t.rows {
			id := t.str(r, "cell")
			if id == "" {
				continue
			}
			c := getCell(id)
			if c.Transport == "" {
				c.Transport = t.str(r, "transport")
			}
			if c.QoS < 0 {
				if q, ok := t.int64v(r, "qos"); ok {
					c.QoS = int(q)
				}
			}
			rep := t.intv(r, "rep")
			seq, _ := t.int64v(r, "seq")
			m := perCell[id]
			if m == nil {
				m = map[key]*msg{}
				perCell[id] = m
			}
			k := key{rep, t.str(r, "node") + "|" + t.str(r, "topic"), seq}
			send, _ := t.int64v(r, "send_ns")
			recv, ok := t.int64v(r, "recv_ns")
			if !ok {
				recv = 0
			}
			d, dok := t.int64v(r, "delay_ns")
			if !dok && recv > 0 && send > 0 {
				d = recv - send
			}
			cur := m[k]
			if cur == nil {
				cur = &msg{send: send, size: t.intv(r, "size")}
				m[k] = cur
			}
			if recv > 0 && (cur.recv == 0 || recv < cur.recv) {
				cur.recv, cur.delay = recv, d
			}
		}
	}
	for id, m := range perCell {
		c := cells[id]
		keys := make([]key, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			if keys[i].rep != keys[j].rep {
				return keys[i].rep < keys[j].rep
			}
			if keys[i].node != keys[j].node {
				return keys[i].node < keys[j].node
			}
			return keys[i].seq < keys[j].seq
		})
		reps := map[int]*window{}
		missing := map[int]bool{}
		var repOrder []int
		for _, k := range keys {
			v := m[k]
			c.Published++
			if c.Size == 0 {
				c.Size = v.size
			}
			w := reps[k.rep]
			if w == nil {
				w = &window{start: math.MaxInt64}
				reps[k.rep] = w
				repOrder = append(repOrder, k.rep)
			}
			if v.send > 0 {
				w.start = min(w.start, v.send)
				w.end = max(w.end, v.send)
			}
			if v.recv > 0 {
				c.Received++
				c.delays = append(c.delays, float64(v.delay)/1e6)
				w.end = max(w.end, v.recv)
			} else {
				missing[k.rep] = true
			}
		}
		sort.Ints(repOrder)
		c.repWindows = reps
		// pattern A fallback completion times
		if kindOf(c.Pattern) == KindA {
			for _, rep := range repOrder {
				if missing[rep] {
					c.Incomplete++
					continue // T is defined for complete repetitions only
				}
				if w := reps[rep]; w.end > w.start {
					c.completion[rep] = float64(w.end-w.start) / 1e9
				}
			}
		}
	}
	if t := ds.compl; t != nil {
		fromFile := map[string]bool{}
		for _, r := range t.rows {
			id := t.str(r, "cell")
			if id == "" {
				continue
			}
			c := getCell(id)
			if !fromFile[id] {
				c.completion = map[int]float64{} // completions.csv wins over the fallback
				c.Incomplete = 0
				fromFile[id] = true
			}
			pub, pok := t.int64v(r, "published")
			del, dok := t.int64v(r, "delivered")
			if pok && dok && del < pub {
				c.Incomplete++
				continue // T is defined for complete repetitions only
			}
			if c.Transport == "" {
				c.Transport = t.str(r, "transport")
			}
			if c.Pattern == "" {
				c.Pattern = "stop-and-wait"
			}
			ns, ok := t.int64v(r, "completion_ns")
			if !ok {
				s, _ := t.int64v(r, "start_ns")
				e, eok := t.int64v(r, "end_ns")
				if !eok || e <= s {
					continue
				}
				ns = e - s
			}
			c.completion[t.intv(r, "rep")] = float64(ns) / 1e9
			if pok && pub > 0 && perCell[id] == nil {
				c.Published += int(pub)
				c.Received += int(del)
			}
		}
	}
	startup(ds, cells, perCellRecv(ds))
	dialStarts(ds, cells)
	for _, c := range cells {
		for _, rep := range sortedWinReps(c.repWindows) {
			if w := c.repWindows[rep]; w.start != math.MaxInt64 && w.end >= w.start {
				c.windows = append(c.windows, *w)
			}
		}
	}
	linkCounters(ds, cells)
	cpuTimes(ds, cells)

	out := make([]*CellResult, 0, len(cells))
	for _, c := range cells {
		c.Kind = kindOf(c.Pattern)
		if c.QoS < 0 {
			c.QoS = 0
		}
		if c.Link.Source == "" {
			c.Link = cellJSONLink(ds.dir, c.Cell)
		}
		if c.Link.Source == "" {
			c.Link = defaultLink(c.Experiment, c.Profile)
		}
		c.DeliveryRatio = nan()
		if c.Published > 0 {
			c.DeliveryRatio = float64(c.Received) / float64(c.Published)
		}
		c.DelayMs = stats.Summarize(c.delays)
		c.StartupMs = stats.Summarize(c.startup)
		comp := make([]float64, 0, len(c.completion))
		for _, rep := range sortedReps(c.completion) {
			comp = append(comp, c.completion[rep])
		}
		c.CompletionS = stats.Summarize(comp)
		c.DelayBoundMs, c.StartupBoundMs = nan(), nan()
		if c.Link.Source != "" {
			c.DelayBoundMs = delayBound(c.Link, c.Size)
			if c.Kind == KindB {
				c.StartupBoundMs = startupBound(c.Link, c.Transport, c.ZeroRTT > 0)
			}
		}
		for _, w := range c.windows {
			c.WindowS += float64(w.end-w.start) / 1e9
		}
		c.PacketsPerSecond, c.BytesPerMessage = nan(), nan()
		if c.hasLinks && c.WindowS > 0 {
			c.PacketsPerSecond = float64(c.Packets) / c.WindowS
		}
		if c.hasLinks && c.Received > 0 {
			c.BytesPerMessage = float64(c.Bytes) / float64(c.Received)
		}
		out = append(out, c)
	}
	sortCells(out)
	for _, c := range out {
		if c.Status != "" && !strings.EqualFold(c.Status, "ok") && !strings.EqualFold(c.Status, "done") {
			msg := c.Error
			if msg == "" {
				msg = "no error recorded"
			}
			ds.note("cell %s has status %s (%s): its numbers cover only the repetitions that produced records", c.Cell, c.Status, msg)
		}
	}
	return out, xiPairs(out, seed, resamples)
}

// newCell starts a cell whose parameters are guessed from the lab's cell id
// (EXPERIMENT_PROFILE_lossN_..._PATTERN_qosQ_SIZEB_..._TRANSPORT); cells.csv
// overrides them when present.
func newCell(id string) *CellResult {
	c := &CellResult{Cell: id, QoS: -1, completion: map[int]float64{}}
	parts := strings.Split(id, "_")
	if len(parts) < 3 {
		return c
	}
	c.Experiment, c.Profile = parts[0], parts[1]
	c.Transport = parts[len(parts)-1]
	for _, p := range parts[2:] {
		switch {
		case strings.HasPrefix(p, "loss"):
			fmt.Sscanf(strings.TrimSuffix(p[4:], "%"), "%g", &c.LossPct)
		case strings.HasPrefix(p, "qos"):
			fmt.Sscanf(p[3:], "%d", &c.QoS)
		case p == "periodic" || p == "stop-and-wait" || p == "reconnect":
			c.Pattern = p
		case strings.HasSuffix(p, "B"):
			fmt.Sscanf(p, "%dB", &c.Size)
		}
	}
	return c
}

// variant describes what, besides profile, loss, transport and QoS,
// distinguishes a cell from the others of its experiment: payload size,
// interval, publishers, retries and the subscriber link.
func (c *CellResult) variant() string {
	return fmt.Sprintf("%dB|%d|n%d|r%d|%d|%g", c.Size, c.IntervalNs, c.Publishers, c.Retries, c.Link.SubDelayNs, c.Link.SubRateBps)
}

// variantLabel is variant for people: only the parts that are set.
func (c *CellResult) variantLabel() string {
	var parts []string
	if c.Size > 0 {
		parts = append(parts, fmt.Sprintf("%dB", c.Size))
	}
	if c.IntervalNs > 0 {
		parts = append(parts, "every "+time.Duration(c.IntervalNs).String())
	}
	if c.Publishers > 1 {
		parts = append(parts, fmt.Sprintf("%d publishers", c.Publishers))
	}
	if c.Retries > 0 {
		parts = append(parts, fmt.Sprintf("%d retries", c.Retries))
	}
	if c.Link.SubDelayNs > 0 {
		parts = append(parts, fmt.Sprintf("sub link %s %s", time.Duration(c.Link.SubDelayNs), rateText(c.Link.SubRateBps)))
	}
	return strings.Join(parts, ", ")
}

func rateText(bps float64) string {
	switch {
	case bps <= 0:
		return "unlimited"
	case bps >= 1e9:
		return strconv.FormatFloat(bps/1e9, 'g', -1, 64) + "Gbit/s"
	case bps >= 1e6:
		return strconv.FormatFloat(bps/1e6, 'g', -1, 64) + "Mbit/s"
	}
	return strconv.FormatFloat(bps/1e3, 'g', -1, 64) + "kbit/s"
}

func sortedReps(m map[int]float64) []int {
	reps := make([]int, 0, len(m))
	for r := range m {
		reps = append(reps, r)
	}
	sort.Ints(reps)
	return reps
}

var profileRank = map[string]int{"wifi": 0, "cellular": 1, "satellite": 2, "ethernet": 3}

func rank(p string) int {
	if r, ok := profileRank[p]; ok {
		return r
	}
	return 4
}

func sortCells(cs []*CellResult) {
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		switch {
		case a.Experiment != b.Experiment:
			return a.Experiment < b.Experiment
		case rank(a.Profile) != rank(b.Profile):
			return rank(a.Profile) < rank(b.Profile)
		case a.Profile != b.Profile:
			return a.Profile < b.Profile
		case a.LossPct != b.LossPct:
			return a.LossPct < b.LossPct
		case a.Pattern != b.Pattern:
			return a.Pattern < b.Pattern
		case a.QoS != b.QoS:
			return a.QoS < b.QoS
		case a.Size != b.Size:
			return a.Size < b.Size
		case a.IntervalNs != b.IntervalNs:
			return a.IntervalNs < b.IntervalNs
		case a.Publishers != b.Publishers:
			return a.Publishers < b.Publishers
		case a.Retries != b.Retries:
			return a.Retries < b.Retries
		case a.Link.SubDelayNs != b.Link.SubDelayNs:
			return a.Link.SubDelayNs < b.Link.SubDelayNs
		case isQUIC(a.Transport) != isQUIC(b.Transport):
			return !isQUIC(a.Transport)
		case a.Transport != b.Transport:
			return a.Transport < b.Transport
		}
		return a.Cell < b.Cell
	})
}

func linkFromRow(t *table, r []string) Link {
	var l Link
	pd, ok1 := t.durationNs(r, "pub_delay_ns", "pub_link_delay_ns", "pub_link.delay_ns", "pub_delay", "delay_ns", "delay_ms", "one_way_delay_ns", "delay")
	sd, ok2 := t.durationNs(r, "sub_delay_ns", "sub_link_delay_ns", "sub_link.delay_ns", "sub_delay")
	pr, ok3 := t.rateBps(r, "pub_rate_bps", "pub_link_rate_bps", "pub_link.rate_bps", "rate_bps", "pub_rate", "rate", "rate_mbps")
	sr, ok4 := t.rateBps(r, "sub_rate_bps", "sub_link_rate_bps", "sub_link.rate_bps", "sub_rate")
	if !ok1 && !ok3 {
		return l
	}
	l.PubDelayNs, l.PubRateBps = pd, pr
	if ok2 {
		l.SubDelayNs = sd
	}
	if ok4 {
		l.SubRateBps = sr
	}
	l.Source = "cells.csv"
	_ = ok2
	return l
}

// cellJSONLink reads DIR/cells/CELL/cell.json (the lab's resolved cell) when
// it exists and holds pub_link / sub_link objects.
func cellJSONLink(dir, cell string) Link {
	b, err := os.ReadFile(filepath.Join(dir, "cells", cell, "cell.json"))
	if err != nil {
		return Link{}
	}
	var v struct {
		Pub *struct {
			RateBps float64 `json:"rate_bps"`
			DelayNs int64   `json:"delay_ns"`
		} `json:"pub_link"`
		Sub *struct {
			RateBps float64 `json:"rate_bps"`
			DelayNs int64   `json:"delay_ns"`
		} `json:"sub_link"`
	}
	if json.Unmarshal(b, &v) != nil || v.Pub == nil {
		return Link{}
	}
	l := Link{PubDelayNs: v.Pub.DelayNs, PubRateBps: v.Pub.RateBps, Source: "cells/" + cell + "/cell.json"}
	if v.Sub != nil {
		l.SubDelayNs, l.SubRateBps = v.Sub.DelayNs, v.Sub.RateBps
	}
	return l
}

// defaultLink derives link parameters from the profile table of
// experiments.md when no file gives them.
func defaultLink(exp, profile string) Link {
	p, ok := profileDefaults[strings.ToLower(profile)]
	if !ok {
		return Link{}
	}
	rtt, both := rttExperiment(exp)
	oneWay := p.delayNs
	if rtt {
		oneWay /= 2
	}
	l := Link{PubDelayNs: oneWay, PubRateBps: p.rate, SubRateBps: 100e6, Source: "profile defaults (experiments.md)"}
	switch {
	case both:
		l.SubDelayNs, l.SubRateBps = oneWay, p.rate
	case strings.EqualFold(exp, "E6"):
		l.SubDelayNs = 12_500_000
	}
	return l
}

// delayBound is the physical lower bound of a message's one-way delay in ms:
// propagation delay of both links plus the serialization of the payload at
// each link's rate (headers left out, so the bound stays a bound).
func delayBound(l Link, size int) float64 {
	ns := float64(l.PubDelayNs + l.SubDelayNs)
	if l.PubRateBps > 0 {
		ns += float64(size) * 8 / l.PubRateBps * 1e9
	}
	if l.SubRateBps > 0 {
		ns += float64(size) * 8 / l.SubRateBps * 1e9
	}
	return ns / 1e6
}

// startupBound is the lower bound of the startup latency in ms: the
// transport's handshake round trips on the publisher link (TCP+TLS 1.3: 2,
// QUIC: 1, QUIC 0-RTT: 0) plus the one-way path to the subscriber (half a
// round trip of the path).
func startupBound(l Link, transport string, zeroRTT bool) float64 {
	rtts := 2.0
	if isQUIC(transport) {
		rtts = 1
		if zeroRTT {
			rtts = 0
		}
	}
	return (rtts*2*float64(l.PubDelayNs) + float64(l.PubDelayNs+l.SubDelayNs)) / 1e6
}

// recvMsg is a received message for the startup-latency join.
type recvMsg struct {
	send, recv, seq int64
	node            string
}

// perCellRecv lists received messages per cell and repetition.
func perCellRecv(ds *dataset) map[string]map[int][]recvMsg {
	out := map[string]map[int][]recvMsg{}
	t := ds.messages
	if t == nil {
		return out
	}
	for _, r := range t.rows {
		recv, ok := t.int64v(r, "recv_ns")
		if !ok || recv <= 0 {
			continue
		}
		id := t.str(r, "cell")
		rep := t.intv(r, "rep")
		send, _ := t.int64v(r, "send_ns")
		seq, _ := t.int64v(r, "seq")
		if out[id] == nil {
			out[id] = map[int][]recvMsg{}
		}
		out[id][rep] = append(out[id][rep], recvMsg{send, recv, seq, t.str(r, "node")})
	}
	return out
}

func sortedWinReps(m map[int]*window) []int {
	reps := make([]int, 0, len(m))
	for r := range m {
		reps = append(reps, r)
	}
	sort.Ints(reps)
	return reps
}

// dialStarts moves the start of each repetition's window back to the
// publisher's first dial start, so the window covers the handshake packets
// that links.csv counts.
func dialStarts(ds *dataset, cells map[string]*CellResult) {
	t := ds.conns
	if t == nil {
		return
	}
	for _, r := range t.rows {
		c := cells[t.str(r, "cell")]
		if c == nil || c.repWindows == nil || !isPublisher(t.str(r, "role"), t.str(r, "node")) {
			continue
		}
		w := c.repWindows[t.intv(r, "rep")]
		if d, ok := t.int64v(r, "dial_start_ns"); ok && w != nil && d > 0 && d < w.start && w.end > 0 {
			w.start = d
		}
	}
}

func isPublisher(role, node string) bool {
	r := strings.ToLower(role + " " + node)
	return strings.Contains(r, "pub")
}

// startup computes pattern B's startup latency: from the dial start of the
// publisher's second connection in a repetition to the subscriber's receipt
// of the first message sent on or after it.
func startup(ds *dataset, cells map[string]*CellResult, recv map[string]map[int][]recvMsg) {
	t := ds.conns
	if t == nil {
		return
	}
	type conn struct {
		dial, firstDelivery int64
		resumed, zero       bool
		role                string
	}
	type repNode struct {
		rep  int
		node string
	}
	byRep := map[string]map[repNode][]conn{}
	for _, r := range t.rows {
		id := t.str(r, "cell")
		if id == "" || !isPublisher(t.str(r, "role"), t.str(r, "node")) {
			continue
		}
		dial, ok := t.int64v(r, "dial_start_ns")
		if !ok {
			continue
		}
		fd, _ := t.int64v(r, "first_delivery_ns")
		if byRep[id] == nil {
			byRep[id] = map[repNode][]conn{}
		}
		k := repNode{t.intv(r, "rep"), t.str(r, "node")}
		byRep[id][k] = append(byRep[id][k], conn{dial, fd, t.boolv(r, "resumed", "tls_resumed"), t.boolv(r, "used_0rtt"), strings.ToLower(t.str(r, "role"))})
	}
	ids := make([]string, 0, len(byRep))
	for id := range byRep {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		c := cells[id]
		if c == nil {
			c = newCell(id)
			cells[id] = c
		}
		if kindOf(c.Pattern) != KindB {
			continue
		}
		type val struct {
			k repNode
			v float64
		}
		var vals []val
		for k, cs := range byRep[id] {
			if len(cs) < 2 {
				continue
			}
			sort.Slice(cs, func(i, j int) bool { return cs[i].dial < cs[j].dial })
			second := cs[1]
			for _, c := range cs {
				if strings.Contains(c.role, "resum") || strings.Contains(c.role, "reconnect") {
					second = c // the lab names the second run's role
					break
				}
			}
			if second.resumed {
				c.Resumed++
			}
			if second.zero {
				c.ZeroRTT++
			}
			var best *recvMsg
			msgs := recv[id][k.rep]
			for i, m := range msgs {
				if m.node != "" && k.node != "" && m.node != k.node {
					continue
				}
				if m.send >= second.dial && (best == nil || m.send < best.send) {
					best = &msgs[i]
				}
			}
			switch {
			case best != nil:
				vals = append(vals, val{k, float64(best.recv-second.dial) / 1e6})
			case second.firstDelivery > second.dial:
				vals = append(vals, val{k, float64(second.firstDelivery-second.dial) / 1e6})
			}
		}
		sort.Slice(vals, func(i, j int) bool {
			if vals[i].k.rep != vals[j].k.rep {
				return vals[i].k.rep < vals[j].k.rep
			}
			return vals[i].k.node < vals[j].k.node
		})
		for _, v := range vals {
			c.startup = append(c.startup, v.v)
		}
	}
}

// linkCounters sums the publisher link's counters per cell.
func linkCounters(ds *dataset, cells map[string]*CellResult) {
	t := ds.links
	if t == nil {
		return
	}
	names := map[string]map[string]bool{}
	pubDir := map[string]map[string]bool{} // links with a direction naming a publisher
	for _, r := range t.rows {
		id, ln := t.str(r, "cell"), t.str(r, "link")
		if names[id] == nil {
			names[id], pubDir[id] = map[string]bool{}, map[string]bool{}
		}
		names[id][ln] = true
		if strings.Contains(strings.ToLower(t.str(r, "direction")), "pub") {
			pubDir[id][ln] = true
		}
	}
	// the publisher's link: named like "pub", else the only link whose
	// directions name a publisher (a shared medium), else the only link
	pubLink := func(id string) (string, bool) {
		all := sortedKeys(names[id])
		for _, n := range all {
			if strings.Contains(strings.ToLower(n), "pub") {
				return n, true
			}
		}
		if d := sortedKeys(pubDir[id]); len(d) == 1 {
			return d[0], true
		}
		if len(all) == 1 {
			return all[0], true
		}
		return "", false
	}
	chosen := map[string]string{}
	warned := false
	for _, r := range t.rows {
		id := t.str(r, "cell")
		name, ok := chosen[id]
		if !ok {
			n, found := pubLink(id)
			if !found {
				if !warned {
					ds.note("links.csv: no link named like \"pub\" in cell %s; its packet counts are left out", id)
					warned = true
				}
				chosen[id] = "\x00"
				continue
			}
			chosen[id], name = n, n
		}
		if t.str(r, "link") != name {
			continue
		}
		c := cells[id]
		if c == nil {
			continue
		}
		c.hasLinks = true
		p, _ := t.int64v(r, "packets")
		b, _ := t.int64v(r, "bytes")
		c.Packets += p
		c.Bytes += b
		for _, col := range []string{"drop_random", "drop_queue", "drop_retries", "drop_down"} {
			d, _ := t.int64v(r, col)
			c.Drops += d
		}
		if isUp(t.str(r, "direction")) {
			c.upBytes += b
		} else {
			c.downBytes += b
		}
	}
}

// isUp reports whether a direction name means "sent by the node".
func isUp(dir string) bool {
	d := strings.ToLower(dir)
	switch d {
	case "up", "tx", "out", "egress", "uplink", "send", "sent", "a-b", "a->b", "ab", "forward", "fwd":
		return true
	}
	return strings.HasPrefix(d, "pub") || strings.HasPrefix(d, "up")
}

func cpuTimes(ds *dataset, cells map[string]*CellResult) {
	t := ds.cpu
	if t == nil {
		return
	}
	for _, r := range t.rows {
		c := cells[t.str(r, "cell")]
		if c == nil || !isPublisher(t.str(r, "role"), t.str(r, "node")) {
			continue
		}
		u, _ := t.int64v(r, "user_ns")
		s, _ := t.int64v(r, "sys_ns")
		c.cpuNs += u + s
		c.hasCPU = true
	}
}

// xiPairs pairs the QUIC and TCP cells of each pattern-A configuration.
func xiPairs(cells []*CellResult, seed uint64, resamples int) []*XiResult {
	type group struct{ quic, other []*CellResult }
	groups := map[string]*group{}
	var order []string
	for _, c := range cells {
		if c.Kind != KindA || len(c.completion) == 0 {
			continue
		}
		k := fmt.Sprintf("%s|%s|%g|%d|%s", c.Experiment, c.Profile, c.LossPct, c.QoS, c.variant())
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k] = g
			order = append(order, k)
		}
		if isQUIC(c.Transport) {
			g.quic = append(g.quic, c)
		} else {
			g.other = append(g.other, c)
		}
	}
	var out []*XiResult
	for _, k := range order {
		g := groups[k]
		for _, q := range g.quic {
			for _, o := range g.other {
				x := &XiResult{Experiment: q.Experiment, Profile: q.Profile, LossPct: q.LossPct, QoS: q.QoS, Size: q.Size,
					TCPCell: o.Cell, QUICCell: q.Cell, TCP: o.Transport}
				var qs, ts []float64
				for _, rep := range sortedReps(q.completion) {
					qs = append(qs, q.completion[rep])
					if tv, ok := o.completion[rep]; ok && tv > 0 {
						x.perRep = append(x.perRep, q.completion[rep]/tv)
					}
				}
				for _, rep := range sortedReps(o.completion) {
					ts = append(ts, o.completion[rep])
				}
				x.Pairs = len(x.perRep)
				x.PerRep = stats.Summarize(x.perRep)
				x.OfMeans = stats.BootstrapRatioOfMeans(qs, ts, stats.BootstrapOptions{Seed: seed, Resamples: resamples})
				out = append(out, x)
			}
		}
	}
	return out
}

// brokerPorts are the default ports of the broker's listeners
// (architecture.md); a packet to one of them is sent by the client.
var brokerPorts = map[uint16]bool{1883: true, 8883: true, 8083: true, 8084: true, 14567: true}

// publisherAddr finds the publisher's address in its link capture: the
// source of the first packet sent to a broker port, else the source of the
// first packet (the client opens the connection).
func publisherAddr(pkts []pcap.Packet) netip.Addr {
	for _, p := range pkts {
		if brokerPorts[p.DstPort] && !brokerPorts[p.SrcPort] {
			return p.Src
		}
	}
	return pkts[0].Src
}

// estimateEnergy fills c.Energy for every cell with traffic.
func estimateEnergy(ds *dataset, cells []*CellResult, ec *energyConfig, plog energy.PowerLog) {
	pcapErrs := 0
	for _, c := range cells {
		if len(c.windows) == 0 && !c.hasLinks && !c.hasCPU {
			continue
		}
		cfg := ec.forExp(c.Experiment)
		models, profileTech, cpuW := cfg.models, cfg.profileTech, cfg.cpuW
		e := &CellEnergy{MeasuredJ: nan(), MeasuredW: nan(), PerMessageJ: nan(), MeanW: nan()}
		tech := profileTech[c.Profile]
		if tech == "" {
			tech = energy.TechnologyForProfile(c.Profile)
		}
		e.Technology = tech
		model, haveModel := models[tech]
		if tech == "" || tech == "ethernet" || !haveModel {
			e.Technology = "none"
			e.RadioSource = "wired link: no radio"
			if tech != "" && tech != "ethernet" && !haveModel {
				e.RadioSource = "no model for " + tech
			}
		} else {
			path := filepath.Join(ds.dir, "cells", c.Cell, "pub.pcap")
			pkts, err := pcap.ReadFile(path)
			switch {
			case err == nil && len(pkts) > 0:
				src := publisherAddr(pkts)
				ev := make([]energy.Event, len(pkts))
				for i, p := range pkts {
					ev[i] = energy.Event{TimeNs: p.TimeNs, Bytes: p.Len, Up: p.Src == src}
				}
				e.Radio = model.Radio(ev, pkts[0].TimeNs, pkts[len(pkts)-1].TimeNs, 0)
				e.RadioSource = "cells/" + c.Cell + "/pub.pcap"
			case err != nil && !errors.Is(err, fs.ErrNotExist):
				pcapErrs++
				if pcapErrs == 1 {
					ds.note("cells/%s/pub.pcap could not be read (%v): its radio energy uses the links.csv totals", c.Cell, errors.Unwrap(err))
				}
				fallthrough
			default:
				if c.hasLinks && c.WindowS > 0 {
					e.Radio = model.Totals(c.upBytes, c.downBytes, c.WindowS)
					e.RadioSource = "links.csv totals (upper estimate: radio taken as active for the whole window)"
				} else {
					e.RadioSource = "no packet data"
				}
			}
		}
		e.CPUSeconds = float64(c.cpuNs) / 1e9
		e.CPUJ = energy.CPU(c.cpuNs, cpuW)
		if !c.hasCPU {
			e.CPUSeconds, e.CPUJ = nan(), nan()
		}
		e.TotalJ = e.Radio.TotalJ
		if c.hasCPU {
			e.TotalJ += e.CPUJ
		}
		if c.Received > 0 {
			e.PerMessageJ = e.TotalJ / float64(c.Received)
		}
		win := math.Max(e.Radio.WindowS, c.WindowS)
		if win > 0 {
			e.MeanW = e.TotalJ / win
		}
		if plog != nil && len(c.windows) > 0 {
			var j, secs float64
			aligned := false
			for _, w := range c.windows {
				if ej, _, ok := plog.Energy(w.start, w.end); ok {
					j += ej
					secs += float64(w.end-w.start) / 1e9
					aligned = true
				}
			}
			if aligned {
				e.MeasuredJ = j
				if secs > 0 {
					e.MeasuredW = j / secs
				}
			}
		}
		c.Energy = e
	}
}
