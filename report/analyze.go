package report

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/netip"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/iotq/iotq/internal/stats"
	"github.com/iotq/iotq/link/profile"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/report/energy"
	"github.com/iotq/iotq/report/pcap"
)

// kindOf names a pattern's kind.
func kindOf(p string) string {
	switch p {
	case records.PatternStopAndWait:
		return KindA
	case records.PatternReconnect, records.PatternReconnectEarly:
		return KindB
	}
	return KindPeriodic
}

func isQUIC(transport string) bool { return records.IsQUIC(transport) }

func nan() float64 { return math.NaN() }

// analyze computes every cell's statistics.
func analyze(ds *dataset, seed uint64, resamples int) ([]*CellResult, []*XiResult) {
	cells := map[string]*CellResult{}
	getCell := func(id string) *CellResult {
		c, ok := cells[id]
		if !ok {
			c = newCell(ds.dir, id)
			cells[id] = c
		}
		return c
	}
	for _, r := range ds.cells {
		if r.Cell == "" {
			continue
		}
		c := getCell(r.Cell)
		// values from done.json stay where cells.csv leaves a field empty
		set := func(dst *string, v string) {
			if v != "" {
				*dst = v
			}
		}
		set(&c.Experiment, r.Experiment)
		set(&c.Profile, r.Profile)
		set(&c.Transport, r.Transport)
		set(&c.Pattern, r.Pattern)
		set(&c.delayConvention, r.DelayConvention)
		set(&c.protocol, r.Protocol)
		set(&c.QUIC0RTT, string(r.QUIC0RTT))
		set(&c.QUICStreams, r.QUICStreams)
		c.LossPct, c.QoS, c.IntervalNs = r.LossPct, r.QoS, r.IntervalNs
		if r.Size > 0 {
			c.Size = r.Size
		}
		c.Publishers, c.Retries, c.Status, c.Error = r.Publishers, r.Retries, r.Status, r.Error
		if r.Topics > 0 {
			c.Topics, c.LargeSize, c.LargeIntervalNs = r.Topics, r.LargeSize, r.LargeIntervalNs
		}
		if l, ok := linkFromRow(ds, r); ok {
			l.PubDirection = c.Link.PubDirection // from done.json; cells.csv has no column for it
			c.Link = l
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
	for _, r := range ds.messages {
		if r.Cell == "" {
			continue
		}
		c := getCell(r.Cell)
		if c.Transport == "" {
			c.Transport = r.Transport
		}
		if c.QoS < 0 {
			c.QoS = r.QoS
		}
		m := perCell[r.Cell]
		if m == nil {
			m = map[key]*msg{}
			perCell[r.Cell] = m
		}
		k := key{r.Rep, r.Node + "|" + r.Topic, r.Seq}
		d := r.DelayNs
		if d == 0 && r.RecvNs > 0 && r.SendNs > 0 {
			d = r.RecvNs - r.SendNs
		}
		cur := m[k]
		if cur == nil {
			cur = &msg{send: r.SendNs, size: r.Size}
			m[k] = cur
		}
		if r.RecvNs > 0 && (cur.recv == 0 || r.RecvNs < cur.recv) {
			cur.recv, cur.delay = r.RecvNs, d
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
	fromFile := map[string]bool{}
	for _, r := range ds.compl {
		if r.Cell == "" {
			continue
		}
		c := getCell(r.Cell)
		if !fromFile[r.Cell] {
			c.completion = map[int]float64{} // completions.csv wins over the fallback
			c.Incomplete = 0
			fromFile[r.Cell] = true
		}
		if r.Delivered < r.Published {
			c.Incomplete++
			continue // T is defined for complete repetitions only
		}
		if c.Transport == "" {
			c.Transport = r.Transport
		}
		if c.Pattern == "" {
			c.Pattern = records.PatternStopAndWait
		}
		ns := r.CompletionNs
		if ns == 0 {
			if r.EndNs == 0 || r.EndNs <= r.StartNs {
				// A repetition with no times at all (its publisher was
				// stopped before it recorded anything) did not complete.
				c.Incomplete++
				continue
			}
			ns = r.EndNs - r.StartNs
		}
		c.completion[r.Rep] = float64(ns) / 1e9
		if r.Published > 0 && perCell[r.Cell] == nil {
			c.Published += r.Published
			c.Received += r.Delivered
		}
	}
	startup(ds, cells, getCell, perCellRecv(ds))
	dialStarts(ds, cells)
	for _, r := range ds.conns {
		if c := cells[r.Cell]; c != nil && records.IsPublisherRole(r.Role) {
			c.PubReconnects += r.Reconnects
		}
	}
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
			c.Link = defaultLink(c.Profile, c.delayConvention)
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
		c.DelayBoundMs, c.StartupBoundMs, c.StartupBoundRTTs, c.StartupRatio = nan(), nan(), nan(), nan()
		if c.Link.Source != "" {
			c.DelayBoundMs = delayBound(c.Link, c.Size)
			if c.Kind == KindB {
				if records.ProtocolOr(c.protocol) == records.ProtocolMQTT {
					c.StartupBoundRTTs = startupRTTsMQTT(c.Transport, c.Pattern, c.QUIC0RTT, c.ZeroRTT > 0)
					c.StartupBoundMs = startupBoundMQTT(c.Link, c.Size, c.StartupBoundRTTs)
				} else {
					c.StartupBoundMs = startupBound(c.Link, c.Transport, c.ZeroRTT > 0)
				}
				c.StartupRatio = ratio(c.StartupMs.Median, c.StartupBoundMs)
			}
		}
		for _, w := range c.windows {
			c.WindowS += float64(w.end-w.start) / 1e9
		}
		c.PacketsPerSecond, c.BytesPerMessage = nan(), nan()
		c.PacketsSentPerSecond, c.PacketsReceivedPerSecond = nan(), nan()
		c.CPUSeconds, c.CPUMsPerMessage = nan(), nan()
		if c.hasCPU {
			c.CPUSeconds = float64(c.cpuNs) / 1e9
			if c.Received > 0 {
				c.CPUMsPerMessage = c.CPUSeconds * 1000 / float64(c.Received)
			}
		}
		if c.hasLinks && c.WindowS > 0 {
			c.PacketsPerSecond = float64(c.Packets) / c.WindowS
			c.PacketsSentPerSecond = float64(c.PacketsSent) / c.WindowS
			c.PacketsReceivedPerSecond = float64(c.PacketsReceived) / c.WindowS
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
		if c.PubReconnects > 0 && c.Pattern != records.PatternPathChange {
			// E10's table shows its reconnections; elsewhere one is news.
			ds.note("cell %s: its publishers lost their connection and reconnected (iotq pub --reconnect), %d reconnections over its repetitions; what a lost connection held counts as lost at QoS 0", c.Cell, c.PubReconnects)
		}
	}
	return out, xiPairs(out, seed, resamples)
}

// newCell starts a cell with the parameters of its done marker
// (DIR/cells/CELL/done.json, records.Done) when the lab left one; cells.csv
// overrides them when present.
func newCell(dir, id string) *CellResult {
	c := &CellResult{Cell: id, QoS: -1, completion: map[int]float64{}}
	d, ok, err := records.ReadDone(filepath.Join(dir, records.DirCells, id))
	if err != nil || !ok || d.Cell.ID != id {
		return c
	}
	p := d.Cell
	c.Experiment, c.Profile, c.LossPct, c.Transport, c.QoS = p.Experiment, p.Profile, p.LossPct, p.Transport, p.QoS
	c.Pattern, c.Size, c.IntervalNs, c.Publishers, c.Retries = p.Pattern, p.Size, p.IntervalNs, p.Publishers, p.Retries
	c.delayConvention, c.Status, c.Error = p.DelayConvention, d.Status, d.Error
	c.protocol, c.QUIC0RTT, c.QUICStreams = p.Protocol, string(p.QUIC0RTT), p.QUICStreams
	c.pathChange = p.PathChange
	c.Topics, c.LargeSize, c.LargeIntervalNs = p.Topics, p.LargeSize, p.LargeIntervalNs
	c.Link = Link{PubDelayNs: p.PubLink.DelayNs, PubRateBps: float64(p.PubLink.RateBps),
		SubDelayNs: p.SubLink.DelayNs, SubRateBps: float64(p.SubLink.RateBps), PubDirection: p.PubLink.Direction,
		Source: path.Join(records.DirCells, id, records.FileDone)}
	return c
}

// streamsLabel is the cell's QUIC stream strategy when it is not the
// default (control, no datagrams; also what cells written before version 5
// ran), else "": a label names it only for the cells that swept it.
func (c *CellResult) streamsLabel() string {
	if !isQUIC(c.Transport) || c.QUICStreams == "" || c.QUICStreams == "control" {
		return ""
	}
	return c.QUICStreams
}

// transportName is the cell's transport for the cell tables, with its QUIC
// stream strategy when not the default ("quic (per-topic)").
func (c *CellResult) transportName() string {
	if l := c.streamsLabel(); l != "" {
		return c.Transport + " (" + l + ")"
	}
	return c.Transport
}

// variant describes what, besides profile, loss, transport and QoS,
// distinguishes a cell from the others of its experiment: payload size,
// interval, publishers, retries and the subscriber link.
func (c *CellResult) variant() string {
	v := fmt.Sprintf("%dB|%d|n%d|r%d|%d|%g|%s", c.Size, c.IntervalNs, c.Publishers, c.Retries, c.Link.SubDelayNs, c.Link.SubRateBps, c.Link.PubDirection)
	if c.Topics > 0 {
		// multi-topic (E9): the cells with and without the large topic are
		// configurations of their own
		v += fmt.Sprintf("|t%d|L%d/%d", c.Topics, c.LargeSize, c.LargeIntervalNs)
	}
	return v
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
	if c.Topics > 0 {
		parts = append(parts, fmt.Sprintf("%d topics", c.Topics))
		if c.LargeSize > 0 {
			parts = append(parts, fmt.Sprintf("large %dB every %s", c.LargeSize, time.Duration(c.LargeIntervalNs)))
		}
	}
	switch c.Link.PubDirection {
	case records.DirectionEgress:
		parts = append(parts, "publisher egress impaired")
	case records.DirectionIngress:
		parts = append(parts, "publisher ingress impaired")
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

func rank(p string) int { return profile.Rank(p) }

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

// linkFromRow reads the links of a cells.csv row; ok is false when
// cells.csv has no link columns.
func linkFromRow(ds *dataset, r records.CellRow) (Link, bool) {
	if !ds.hasCellCol("pub_delay_ns") && !ds.hasCellCol("pub_rate_bps") {
		return Link{}, false
	}
	return Link{PubDelayNs: r.PubDelayNs, PubRateBps: float64(r.PubRateBps),
		SubDelayNs: r.SubDelayNs, SubRateBps: float64(r.SubRateBps), Source: records.FileCells}, true
}

// defaultLink derives link parameters from the profile table (link/profile)
// when no file gives them: the profile's link for the publisher, its delay
// figure read under the cell's delay convention (one-way when no file says),
// and an ethernet link to the subscriber.
func defaultLink(name, convention string) Link {
	p, err := profile.ByName(name)
	if err != nil {
		return Link{}
	}
	eth, _ := profile.ByName("ethernet")
	rtt := convention == records.DelayRTT
	return Link{PubDelayNs: int64(p.PerDirection(rtt)), PubRateBps: float64(p.Rate),
		SubDelayNs: int64(eth.PerDirection(rtt)), SubRateBps: float64(eth.Rate), Source: "profile defaults (experiments.md)"}
}

// delayBound is the physical lower bound of a message's one-way delay in ms:
// propagation delay of both links plus the serialization of the payload at
// each link's rate (headers left out, so the bound stays a bound).
func delayBound(l Link, size int) float64 {
	ns := float64(l.pubUpNs() + l.SubDelayNs)
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
	return (rtts*float64(l.pubRTTNs()) + float64(l.pubUpNs()+l.SubDelayNs)) / 1e6
}

// startupRTTsMQTT is the number of round trips of the publisher's link
// that a resumed MQTT start needs before its first PUBLISH can be
// processed by the broker (experiments.md, "Start-up latency and its
// bound"):
//
//   - TCP+TLS 1.3 (no early data): TCP handshake 1 + TLS handshake 1, then
//     CONNECT rides with the client's Finished; the library waits for
//     CONNACK (+1) before it publishes: 3. With the PUBLISH written behind
//     CONNECT (reconnect-early): 2.
//   - QUIC with 0-RTT: CONNECT in the first flight, CONNACK after 1, the
//     PUBLISH after it: 1. With the PUBLISH in the 0-RTT flight: 0 when the
//     broker accepts early data, 1 when it holds it until the handshake
//     completed (the client's Finished arrives one round trip after its
//     first flight).
//   - QUIC without 0-RTT (refused, no ticket): handshake 1, then as with
//     0-RTT: 2, or 1 with the PUBLISH behind CONNECT.
func startupRTTsMQTT(transport, pattern, policy string, zeroRTT bool) float64 {
	early := pattern == records.PatternReconnectEarly
	switch {
	case !isQUIC(transport):
		if early {
			return 2
		}
		return 3
	case !zeroRTT:
		if early {
			return 1
		}
		return 2
	case !early:
		return 1
	case policy == string(records.EarlyAccept):
		return 0
	}
	return 1 // hold (the default) or an older cell without the column
}

// startupBoundMQTT is the bound of a resumed MQTT start in ms: rtts round
// trips of the publisher's link, then the message's own one-way bound
// (delayBound: both links' propagation and the payload's serialization).
// The handshake packets' serialization is left out, so the bound stays a
// bound.
func startupBoundMQTT(l Link, size int, rtts float64) float64 {
	return rtts*float64(l.pubRTTNs())/1e6 + delayBound(l, size)
}

// ratio is a/b, NaN when either is not a positive finite number.
func ratio(a, b float64) float64 {
	if !finite(a) || !finite(b) || a <= 0 || b <= 0 {
		return nan()
	}
	return a / b
}

// pubUpNs is the publisher link's delay towards the broker: none when only
// the direction towards the publisher is impaired.
func (l Link) pubUpNs() int64 {
	if l.PubDirection == records.DirectionIngress {
		return 0
	}
	return l.PubDelayNs
}

// pubRTTNs is the publisher link's round trip: its delay once when only
// one direction is impaired, else twice.
func (l Link) pubRTTNs() int64 {
	if l.PubDirection == records.DirectionEgress || l.PubDirection == records.DirectionIngress {
		return l.PubDelayNs
	}
	return 2 * l.PubDelayNs
}

// recvMsg is a received message for the startup-latency join.
type recvMsg struct {
	send, recv, seq int64
	node            string
}

// perCellRecv lists received messages per cell and repetition.
func perCellRecv(ds *dataset) map[string]map[int][]recvMsg {
	out := map[string]map[int][]recvMsg{}
	for _, r := range ds.messages {
		if r.RecvNs <= 0 {
			continue
		}
		if out[r.Cell] == nil {
			out[r.Cell] = map[int][]recvMsg{}
		}
		out[r.Cell][r.Rep] = append(out[r.Cell][r.Rep], recvMsg{r.SendNs, r.RecvNs, r.Seq, r.Node})
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
	for _, r := range ds.conns {
		c := cells[r.Cell]
		if c == nil || c.repWindows == nil || !records.IsPublisherRole(r.Role) {
			continue
		}
		w := c.repWindows[r.Rep]
		if d := r.DialStartNs; w != nil && d > 0 && d < w.start && w.end > 0 {
			w.start = d
		}
	}
}

// startup computes pattern B's startup latency: from the dial start of the
// publisher's second connection in a repetition to the subscriber's receipt
// of the first message sent on or after it.
func startup(ds *dataset, cells map[string]*CellResult, getCell func(string) *CellResult, recv map[string]map[int][]recvMsg) {
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
	for _, r := range ds.conns {
		if r.Cell == "" || !records.IsPublisherRole(r.Role) || r.DialStartNs == 0 {
			continue
		}
		if byRep[r.Cell] == nil {
			byRep[r.Cell] = map[repNode][]conn{}
		}
		k := repNode{r.Rep, r.Node}
		byRep[r.Cell][k] = append(byRep[r.Cell][k], conn{r.DialStartNs, r.FirstDeliveryNs, r.Resumed, r.Used0RTT, r.Role})
	}
	ids := make([]string, 0, len(byRep))
	for id := range byRep {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		c := getCell(id)
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
				if c.role == records.RolePubResume {
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

// linkCounters sums the publisher link's counters per cell: the link
// named records.LinkPub, else the shared medium (records.LinkMedium), else
// a cell's only link.
func linkCounters(ds *dataset, cells map[string]*CellResult) {
	names := map[string]map[string]bool{}
	for _, r := range ds.links {
		if names[r.Cell] == nil {
			names[r.Cell] = map[string]bool{}
		}
		names[r.Cell][r.Link] = true
	}
	pubLink := func(id string) (string, bool) {
		switch {
		case names[id][records.LinkPub]:
			return records.LinkPub, true
		case names[id][records.LinkMedium]:
			return records.LinkMedium, true
		case len(names[id]) == 1:
			return sortedKeys(names[id])[0], true
		}
		return "", false
	}
	chosen := map[string]string{}
	warned := false
	for _, r := range ds.links {
		name, ok := chosen[r.Cell]
		if !ok {
			n, found := pubLink(r.Cell)
			if !found {
				if !warned {
					ds.note("links.csv: no link named %q or %q in cell %s; its packet counts are left out", records.LinkPub, records.LinkMedium, r.Cell)
					warned = true
				}
				chosen[r.Cell] = "\x00"
				continue
			}
			chosen[r.Cell], name = n, n
		}
		c := cells[r.Cell]
		if r.Link != name || c == nil {
			continue
		}
		c.hasLinks = true
		c.Packets += r.Packets
		c.Bytes += r.Bytes
		c.Drops += r.Drops()
		if records.IsPublisherNode(records.LinkFrom(r.Direction)) {
			c.upBytes += r.Bytes
		} else {
			c.downBytes += r.Bytes
		}
		// the measured publisher's own packets, per direction: sent is
		// what it offered (the testbed counted what the device sent),
		// received what the link delivered to it
		from, to, _ := strings.Cut(r.Direction, "->")
		switch {
		case from == records.NodePub:
			c.PacketsSent += r.Packets
		case to == records.NodePub:
			c.PacketsReceived += r.Packets - r.Drops()
		}
	}
}

func cpuTimes(ds *dataset, cells map[string]*CellResult) {
	for _, r := range ds.cpu {
		c := cells[r.Cell]
		if c == nil || !records.IsPublisherRole(r.Role) {
			continue
		}
		c.cpuNs += r.UserNs + r.SysNs
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
				variant := q.variantLabel()
				if l := q.streamsLabel(); l != "" {
					variant = strings.TrimPrefix(variant+", QUIC streams "+l, ", ")
				}
				x := &XiResult{Experiment: q.Experiment, Profile: q.Profile, LossPct: q.LossPct, QoS: q.QoS, Size: q.Size,
					Variant: variant, TCPCell: o.Cell, QUICCell: q.Cell, TCP: o.Transport}
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
			if p, err := profile.ByName(c.Profile); err == nil {
				tech = p.Radio // the profile table's radio
			}
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
		// the whole device, as a meter on the board sees it
		e.BaseW = cfg.baseW
		e.BaseJ = cfg.baseW * win
		e.DeviceJ = e.BaseJ + e.TotalJ
		e.DeviceMeanW = nan()
		if win > 0 {
			e.DeviceMeanW = e.DeviceJ / win
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
