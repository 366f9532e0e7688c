// SPDX-License-Identifier: MIT

package mqttcore

import (
	"bytes"
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
		pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish}, TopicName: "t", Expiry: c.expiry}
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
