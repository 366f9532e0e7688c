// SPDX-License-Identifier: MIT

package mqttcore

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/internal/mqttcore/packets"
)

// A packet's arrival time is the time of the read that brought it
// (patch 45), read from the clock once per read, not per packet.
func TestReceivedAtIsTheReadsTime(t *testing.T) {
	cl, _, _ := newTestClient()
	if got, now := cl.receivedAt(), time.Now().Unix(); got < now-1 || got > now {
		t.Fatalf("before any read: receivedAt %d, clock %d", got, now)
	}
	cl.Net.bconn = newConnReader(strings.NewReader("abc"), newReadBufferPool(1024), 1024)
	before := time.Now().Unix()
	if _, err := cl.Net.bconn.ReadByte(); err != nil {
		t.Fatal(err)
	}
	after := time.Now().Unix()
	got := cl.receivedAt()
	if got < before || got > after {
		t.Fatalf("receivedAt %d, want the read's time in [%d, %d]", got, before, after)
	}
	cl.Net.bconn.readAt = 12345 // a later packet from the same read keeps its time
	if _, err := cl.Net.bconn.ReadByte(); err != nil {
		t.Fatal(err)
	}
	if got := cl.receivedAt(); got != 12345 {
		t.Fatalf("a buffered byte changed the arrival time to %d", got)
	}
	big := make([]byte, 2048) // a read larger than the buffer bypasses it
	cl.Net.bconn = newConnReader(bytes.NewReader(big), newReadBufferPool(1024), 1024)
	if _, err := cl.Net.bconn.Read(big); err != nil {
		t.Fatal(err)
	}
	if cl.Net.bconn.readAt < before {
		t.Fatalf("a direct read left the arrival time at %d", cl.Net.bconn.readAt)
	}
}

// The remaining expiry interval sent to a subscriber counts from the
// batch's clock reading, and is at least 1 [MQTT-3.3.2-6].
func TestEncodeExpiryCountsFromBatchTime(t *testing.T) {
	cl, _, _ := newTestClient()
	cl.Properties.ProtocolVersion = 5
	now := unixNow(1_000_000)
	for _, c := range []struct {
		expiry int64
		want   uint32
	}{{1_000_100, 100}, {1_000_001, 1}, {999_990, 1}} {
		pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish}, TopicName: "t", Expiry: c.expiry,
			Properties: packets.Properties{MessageExpiryInterval: 200}} // it carries one (patch 58)
		var buf bytes.Buffer
		if err := cl.encodePacket(&pk, &buf, &now); err != nil {
			t.Fatal(err)
		}
		if pk.Properties.MessageExpiryInterval != c.want {
			t.Fatalf("expiry at %d, now %d: interval %d, want %d", c.expiry, now, pk.Properties.MessageExpiryInterval, c.want)
		}
	}
	var fresh unixNow
	if got, clock := fresh.get(), time.Now().Unix(); got < clock-1 || got > clock {
		t.Fatalf("an unread unixNow gave %d, clock %d", got, clock)
	}
}

type readCount struct {
	net.Conn
	n int
}

func (c *readCount) ReadDirectly(n int) { c.n += n }

// fillNow takes what a plain socket holds without waiting, counts it for a
// connection that counts its input, and reports false, at once, when
// nothing is there (patch 46).
func TestFillNowReadsWithoutWaiting(t *testing.T) {
	conn, peer := tcpPair(t)
	counted := &readCount{Conn: conn}
	c := newConnReader(conn, newReadBufferPool(1024), 1024)
	c.raw, c.counted = newRawWriter(conn), counted
	if c.raw == nil {
		t.Skip("no raw socket access on this platform")
	}
	// The last read that brought data filled the big buffer: an empty
	// fillNow must keep it for the next read.
	c.big = c.pool.Get().(*[]byte)
	c.last = 1024
	start := time.Now()
	if c.fillNow() {
		t.Fatal("fillNow reported data on a socket that holds none")
	}
	if c.big == nil || c.last != 1024 {
		t.Fatalf("an empty fillNow dropped the big buffer (last %d): the next read under load would use the small one", c.last)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("fillNow waited %v on an empty socket", d)
	}
	if _, err := peer.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !c.fillNow() {
		if time.Now().After(deadline) {
			t.Fatal("fillNow never saw the 5 bytes the peer wrote")
		}
		time.Sleep(time.Millisecond)
	}
	if c.buffered() != 5 || counted.n != 5 || c.readAt == 0 {
		t.Fatalf("after fillNow: %d buffered, %d counted, readAt %d; want 5, 5, set", c.buffered(), counted.n, c.readAt)
	}
	if c.fillNow() {
		t.Fatal("fillNow read over unread input")
	}
	b := make([]byte, 5)
	if n, err := c.Read(b); n != 5 || err != nil || string(b) != "hello" {
		t.Fatalf("Read after fillNow: %d %v %q", n, err, b)
	}
}
