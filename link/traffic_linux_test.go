package link

import (
	"bytes"
	"encoding/binary"
	"github.com/iotq/iotq/internal/testutil"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func statsOf(t testing.TB, n *Network, link, dir string) LinkStats {
	t.Helper()
	for _, s := range n.Stats() {
		if s.Link == link && s.Direction() == dir {
			return s
		}
	}
	t.Fatalf("no stats for %s %s", link, dir)
	return LinkStats{}
}

// TestTCPBulkThrough20Mbit: goodput reaches at least 85 % of the rate and
// the wire rate never exceeds 102 % of it.
func TestTCPBulkThrough20Mbit(t *testing.T) {
	const rate = 20_000_000
	p := Params{Rate: rate, Delay: 10 * time.Millisecond}
	n := up(t, twoNodes(p, p), Options{CongestionControl: "cubic", RealTimeProcess: true})
	var ln net.Listener
	if err := n.Do("b", func() (err error) { ln, err = net.Listen("tcp4", ":7100"); return }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type sample struct {
		at    time.Time
		bytes int64
	}
	samples := make(chan []sample, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			samples <- nil
			return
		}
		defer c.Close()
		var s []sample
		var total int64
		buf := make([]byte, 64<<10)
		next := time.Now()
		for {
			k, err := c.Read(buf)
			total += int64(k)
			if now := time.Now(); now.After(next) {
				s = append(s, sample{now, total})
				next = now.Add(100 * time.Millisecond)
			}
			if err != nil {
				s = append(s, sample{time.Now(), total})
				samples <- s
				return
			}
		}
	}()
	var c net.Conn
	if err := n.Do("a", func() (err error) {
		c, err = net.DialTimeout("tcp4", netip.AddrPortFrom(n.AddrOn("b", "ab"), 7100).String(), 5*time.Second)
		return
	}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	deadline := time.Now().Add(3500 * time.Millisecond)
	c.SetWriteDeadline(deadline.Add(2 * time.Second))
	for time.Now().Before(deadline) {
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	s := <-samples
	if len(s) < 10 {
		t.Fatalf("only %d samples", len(s))
	}
	// Steady state: from 1 s after the first byte to the end.
	var from sample
	for _, x := range s {
		if x.at.Sub(s[0].at) >= time.Second {
			from = x
			break
		}
	}
	last := s[len(s)-1]
	goodput := float64(last.bytes-from.bytes) * 8 / last.at.Sub(from.at).Seconds()
	st := statsOf(t, n, "ab", "a->b")
	t.Logf("goodput %.2f Mbit/s (%.1f %% of rate); a->b %d packets, drops queue %d; queue delay %+v",
		goodput/1e6, 100*goodput/rate, st.Packets, st.DropQueue, st.QueueDelay)
	if goodput < 0.85*rate {
		t.Errorf("goodput %.2f Mbit/s is below 85 %% of %d bit/s", goodput/1e6, rate)
	}
	// Wire rate over the steady state: IP bytes = payload plus 52 bytes of
	// headers per segment of at most 1448 bytes. (Shorter windows measure
	// the reader's scheduling more than the link.)
	wire := goodput * 1500 / 1448
	if wire > 1.02*rate {
		t.Errorf("%.2f Mbit/s on the wire, above 102 %% of the rate", wire/1e6)
	}
}

// TestQueueOverflowBoundsQueueingDelay offers twice the rate: the queue
// overflows, and no packet waits longer than queue/rate.
func TestQueueOverflowBoundsQueueingDelay(t *testing.T) {
	const rate = 5_000_000
	const queue = 30_000 // 48 ms at 5 Mbit/s
	for _, q := range []struct {
		name string
		p    Params
	}{
		{"droptail", Params{QueueBytes: queue}},
		{"drophead", Params{Queue: QueueSpec{Name: "drophead", Bytes: queue}}},
	} {
		t.Run(q.name, func(t *testing.T) {
			p := q.p
			p.Rate, p.Delay = rate, 10*time.Millisecond
			queueOverflow(t, p, queue)
		})
	}
}

func queueOverflow(t *testing.T, p Params, queue int) {
	rate, delay := p.Rate, p.Delay
	n := up(t, twoNodes(p, Params{}), Options{})
	var pc net.PacketConn
	if err := n.Do("b", func() (err error) { pc, err = net.ListenPacket("udp4", ":7200"); return }); err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	pc.(*net.UDPConn).SetReadBuffer(4 << 20)
	c := dialUDP(t, n, "a", netip.AddrPortFrom(n.AddrOn("b", "ab"), 7200))
	type oneWay struct{ lo, hi time.Duration }
	result := make(chan oneWay)
	go func() {
		w := oneWay{lo: time.Hour}
		buf := make([]byte, 2048)
		for {
			pc.SetReadDeadline(time.Now().Add(time.Second))
			k, _, err := pc.ReadFrom(buf)
			if err != nil {
				result <- w
				return
			}
			if k >= 8 {
				d := time.Duration(time.Now().UnixNano() - int64(binary.BigEndian.Uint64(buf)))
				w.lo, w.hi = min(w.lo, d), max(w.hi, d)
			}
		}
	}()
	msg := make([]byte, 972) // 1000 bytes of IP
	// 10 packets every 8 ms = 10 Mbit/s for 1.5 s.
	for range 190 {
		for range 10 {
			binary.BigEndian.PutUint64(msg, uint64(time.Now().UnixNano()))
			c.Write(msg)
		}
		time.Sleep(8 * time.Millisecond)
	}
	w := <-result
	st := statsOf(t, n, "ab", "a->b")
	bound := time.Duration(float64(queue) * 8 / float64(rate) * float64(time.Second))
	t.Logf("arrived %d delivered %d queue drops %d; queue delay %+v; one-way %v..%v (queue bound %v + delay %v + scheduling)",
		st.Arrived, st.Packets, st.DropQueue, st.QueueDelay, w.lo, w.hi, bound, delay)
	if st.DropQueue < st.Arrived/4 {
		t.Errorf("only %d of %d packets dropped by the queue at twice the rate", st.DropQueue, st.Arrived)
	}
	if st.DropRandom+st.DropDown+st.DropRetries != 0 {
		t.Errorf("drops of other causes: %+v", st.DirStats)
	}
	if st.QueueDelay.Max > bound {
		t.Errorf("queueing delay max %v > queue/rate %v", st.QueueDelay.Max, bound)
	}
	// End to end the model's bound is a floor, not a ceiling: sender and
	// receiver scheduling add to it on a shared machine.
	if min := delay + txTime(1000, rate); w.lo < min {
		t.Errorf("a packet arrived after %v, faster than delay plus serialization %v", w.lo, min)
	}
}

// readPcap counts the records of a pcap file and checks its header.
func readPcap(t testing.TB, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 24 || binary.LittleEndian.Uint32(b) != 0xa1b23c4d || binary.LittleEndian.Uint32(b[20:]) != LinkTypeRaw {
		t.Fatalf("%s: bad pcap header", path)
	}
	n := 0
	for off := 24; off < len(b); n++ {
		if off+16 > len(b) {
			t.Fatalf("%s: truncated record header", path)
		}
		incl := int(binary.LittleEndian.Uint32(b[off+8:]))
		off += 16 + incl
		if off > len(b) {
			t.Fatalf("%s: truncated record", path)
		}
	}
	return n
}

// TestPcapCountsMatchCounters: each link end's capture holds what its node
// sent plus what it received, as the counters say, and tshark agrees.
func TestPcapCountsMatchCounters(t *testing.T) {
	dir := t.TempDir()
	n := up(t, twoNodes(Params{Loss: 0.1, Delay: time.Millisecond}, Params{Delay: time.Millisecond}), Options{CaptureDir: dir})
	srv := udpEcho(t, n, "b", "ab", 7300)
	c := dialUDP(t, n, "a", srv)
	pingUDP(t, c, 300, time.Millisecond, 200)
	ab, ba := statsOf(t, n, "ab", "a->b"), statsOf(t, n, "ab", "b->a")
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{
		"ab-a.pcap": ab.Arrived + ba.Packets,
		"ab-b.pcap": ba.Arrived + ab.Packets,
	}
	if ab.DropRandom == 0 {
		t.Errorf("no random drops at 10 %%: %+v", ab.DirStats)
	}
	tshark, terr := exec.LookPath("tshark")
	for file, w := range want {
		path := filepath.Join(dir, file)
		if got := readPcap(t, path); uint64(got) != w {
			t.Errorf("%s: %d records, counters say %d", file, got, w)
		}
		if terr != nil {
			t.Logf("tshark not installed: checked %s with our own reader only", file)
			continue
		}
		out, err := exec.Command(tshark, "-n", "-r", path, "-T", "fields", "-e", "ip.src").Output()
		if err != nil {
			t.Fatalf("tshark %s: %v", file, err)
		}
		if got := strings.Count(string(out), "\n"); uint64(got) != w {
			t.Errorf("tshark reads %d packets in %s, counters say %d", got, file, w)
		}
	}
}

// TestSharedMediumCapacityAndResidualLoss: three stations flood the hub;
// the total never exceeds the capacity and the residual loss is FER^(R+1).
func TestSharedMediumCapacityAndResidualLoss(t *testing.T) {
	const capacity = 10_000_000
	mp := MediumParams{Capacity: capacity, FrameErrorRate: 0.3, Retries: 1, Delay: 2 * time.Millisecond}
	topo := Topology{
		Nodes: []Node{{Name: "hub"}, {Name: "s1"}, {Name: "s2"}, {Name: "s3"}},
		Media: []Medium{{Name: "cell", Hub: "hub", Stations: []string{"s1", "s2", "s3"}, MediumParams: mp}},
	}
	n := up(t, topo, Options{})
	var pc net.PacketConn
	if err := n.Do("hub", func() (err error) { pc, err = net.ListenPacket("udp4", ":7400"); return }); err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	pc.(*net.UDPConn).SetReadBuffer(8 << 20)
	type rx struct {
		first, last time.Time
		bytes       int
	}
	res := make(chan rx)
	go func() {
		var r rx
		buf := make([]byte, 2048)
		for {
			pc.SetReadDeadline(time.Now().Add(time.Second))
			k, _, err := pc.ReadFrom(buf)
			if err != nil {
				res <- r
				return
			}
			now := time.Now()
			if r.bytes == 0 {
				r.first = now
			}
			r.last = now
			r.bytes += k + 28
		}
	}()
	hub := netip.AddrPortFrom(n.AddrOn("hub", "cell"), 7400)
	conns := []*net.UDPConn{dialUDP(t, n, "s1", hub), dialUDP(t, n, "s2", hub), dialUDP(t, n, "s3", hub)}
	msg := make([]byte, 972)
	// each station offers 8 Mbit/s (3 packets of 1000 bytes every 3 ms) for 1.5 s.
	for range 500 {
		for _, c := range conns {
			for range 3 {
				c.Write(msg)
			}
		}
		time.Sleep(3 * time.Millisecond)
	}
	r := <-res
	var pk, retr, arrived uint64
	for _, s := range []string{"s1", "s2", "s3"} {
		st := statsOf(t, n, "cell", s+"->hub")
		pk += st.Packets
		retr += st.DropRetries
		arrived += st.Arrived
	}
	thr := float64(r.bytes) * 8 / r.last.Sub(r.first).Seconds()
	frames := pk + retr
	residual := float64(retr) / float64(frames)
	want := math.Pow(mp.FrameErrorRate, float64(mp.Retries+1))
	sigma := math.Sqrt(want * (1 - want) / float64(frames))
	t.Logf("offered %d frames, %d got airtime, delivered %d; residual loss %.4f (want %.4f ± %.4f); received %.2f Mbit/s",
		arrived, frames, pk, residual, want, 4*sigma, thr/1e6)
	if thr > capacity*1.02 {
		t.Errorf("hub received %.2f Mbit/s, more than the capacity %d", thr/1e6, capacity)
	}
	if math.Abs(residual-want) > 4*sigma {
		t.Errorf("residual loss %.4f, want %.4f ± %.4f", residual, want, 4*sigma)
	}
	if frames == arrived {
		t.Errorf("saturated medium dropped nothing at the queue")
	}
}

// TestNoTUNOrNamespaceLeftBehind checks the host after a build and Close.
func TestNoTUNOrNamespaceLeftBehind(t *testing.T) {
	testutil.RequireNetAdmin(t, Preflight)
	n, err := Up(t.Context(), twoNodes(Params{}, Params{}), Options{Prefix: "iotqc-"})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	names, _ := Namespaces("iotqc-")
	if len(names) != 0 {
		t.Errorf("namespaces left: %v", names)
	}
	out, _ := exec.Command("ip", "-o", "link").Output()
	if bytes.Contains(out, []byte("iotqc")) {
		t.Errorf("interfaces left:\n%s", out)
	}
}

// TestScheduleTakesLinkDown: a schedule takes the link down from 0.5 s to
// 1 s after Up; packets sent meanwhile are counted as "down" drops.
func TestScheduleTakesLinkDown(t *testing.T) {
	loss := 1.0
	p := Params{Schedule: []Step{{At: 500 * time.Millisecond, Down: 500 * time.Millisecond}, {At: 1500 * time.Millisecond, Loss: &loss}}}
	n := up(t, twoNodes(p, Params{}), Options{})
	// The schedule starts when the link comes up, just before up returns
	// (building the namespaces can take a second on a loaded host, so the
	// clock starts here, not before up).
	start := time.Now()
	c := dialUDP(t, n, "a", netip.AddrPortFrom(n.AddrOn("b", "ab"), 9))
	sent := 0
	for time.Since(start) < 1300*time.Millisecond {
		c.Write(make([]byte, 10))
		sent++
		time.Sleep(10 * time.Millisecond)
	}
	st := statsOf(t, n, "ab", "a->b")
	t.Logf("sent %d: delivered %d, down %d", sent, st.Packets, st.DropDown)
	// 500 ms of about 1300 ms of sending: between a fifth and three fifths, with room for scheduling.
	if st.DropDown < st.Arrived/5 || st.DropDown > st.Arrived*3/5 || st.Packets == 0 {
		t.Errorf("down drops %d of %d arrivals, want about 500 ms worth", st.DropDown, st.Arrived)
	}
	if st.DropRandom != 0 {
		t.Errorf("loss step at 1.5 s applied early: %d random drops", st.DropRandom)
	}
}
