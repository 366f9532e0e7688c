package link

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTraceDrivenLinkForwards runs a tiny network whose a->b direction is
// driven by a trace of one opportunity every 10 ms (1.2 Mbit/s): 20
// datagrams of 1400 B sent at once all arrive, each in its own
// opportunity, so the last one comes 19 opportunities (190 ms) after the
// first: at least 180 ms, allowing one opportunity for a late wake-up of
// the forwarder at the first; b->a is unlimited.
func TestTraceDrivenLinkForwards(t *testing.T) {
	var src strings.Builder
	for i := 1; i <= 100; i++ {
		src.WriteString(strconv.Itoa(i*10) + "\n")
	}
	tr := mustTrace(t, src.String())
	n := up(t, twoNodes(Params{Trace: tr}, Params{}), Options{})
	var pc net.PacketConn
	if err := n.Do("b", func() (err error) { pc, err = net.ListenPacket("udp4", ":7003"); return }); err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	c := dialUDP(t, n, "a", netip.AddrPortFrom(n.AddrOn("b", "ab"), 7003))
	const total = 20
	msg := make([]byte, 1400)
	for range total {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var first, last time.Time
	buf := make([]byte, 2048)
	got := 0
	for got < total && ctx.Err() == nil {
		pc.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, _, err := pc.ReadFrom(buf); err != nil {
			break
		}
		if got == 0 {
			first = time.Now()
		}
		last = time.Now()
		got++
	}
	if got != total {
		t.Fatalf("%d of %d datagrams arrived", got, total)
	}
	if spread := last.Sub(first); spread < 180*time.Millisecond {
		t.Errorf("20 MTU-sized datagrams spread over %v: fewer than one per 10 ms opportunity?", spread)
	}
	s := n.Stats()[0]
	if s.Packets != total || s.Drops() != 0 || !strings.Contains(s.Queue, "droptail") {
		t.Errorf("counters %+v", s.DirStats)
	}
}
