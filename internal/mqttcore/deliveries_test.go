// SPDX-License-Identifier: MIT

package mqttcore

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/iotq/iotq/internal/mqttcore/packets"
)

// A reader holding a subscriber's writer's role (patch 40) keeps it while
// the queue is empty (popHeld), so no second writer starts; endHeld gives
// it up only when nothing came meanwhile.
func TestOutQueueHeldRole(t *testing.T) {
	q := outQueue{max: 4}
	a, b := new(packets.Packet), new(packets.Packet)
	if ok, start := q.push(a); !ok || !start {
		t.Fatalf("first push: ok %v start %v, want a writer to start", ok, start)
	}
	if pk, ok := q.popHeld(); !ok || pk != a {
		t.Fatal("popHeld did not return the queued packet")
	}
	if _, ok := q.popHeld(); ok {
		t.Fatal("popHeld on an empty queue returned a packet")
	}
	if ok, start := q.push(b); !ok || start {
		t.Fatalf("push while the role is held: ok %v start %v, want no second writer", ok, start)
	}
	if q.endHeld() {
		t.Fatal("endHeld gave the role up with a packet queued")
	}
	if pk, _ := q.popHeld(); pk != b {
		t.Fatal("popHeld lost the packet queued while the role was held")
	}
	if !q.endHeld() {
		t.Fatal("endHeld kept the role on an empty queue")
	}
	if _, start := q.push(a); !start {
		t.Fatal("after endHeld the next push must start a writer")
	}
}

// A reconnecting client's resend holds the writer's role before anything
// is queued (patch 60): deliveries pushed meanwhile start no writer and
// wait behind the resend; hold fails while a writer runs.
func TestOutQueueHoldBeforeAnyPush(t *testing.T) {
	q := outQueue{max: 4}
	if !q.hold() {
		t.Fatal("hold failed on an idle queue")
	}
	if q.hold() {
		t.Fatal("a second hold succeeded")
	}
	if ok, start := q.push(new(packets.Packet)); !ok || start {
		t.Fatalf("push while held: ok %v start %v, want no writer started", ok, start)
	}
	if q.endHeld() {
		t.Fatal("endHeld gave the role up with a packet queued")
	}
	if _, ok := q.pop(); !ok {
		t.Fatal("the packet queued while held is gone")
	}
	if _, ok := q.pop(); ok {
		t.Fatal("pop on an empty queue returned a packet")
	}
	if !q.hold() {
		t.Fatal("hold failed after the writer ended")
	}
}

// A batch lists subscribers only while its reader handles input: add from
// another goroutine outside that window must fail (the caller then starts
// the writer), or a delivery would wait for the reader's next input.
func TestDeliveryBatchOpensOnlyForTheReader(t *testing.T) {
	var b deliveryBatch
	sc := new(Client)
	if b.add(sc) {
		t.Fatal("add succeeded on a batch its reader never opened")
	}
	b.begin()
	if !b.add(sc) || !b.pending() {
		t.Fatal("add failed on an open batch")
	}
	if got := b.take(true); len(got) != 1 || got[0] != sc {
		t.Fatalf("take returned %v", got)
	}
	if b.pending() || b.add(sc) {
		t.Fatal("a closed batch still lists or accepts subscribers")
	}
}

// A reader's write that the subscriber's socket takes only in part (its
// buffers are full) leaves the rest to a write goroutine, which must write
// it even when nothing else is queued: the subscriber gets the whole
// packet once it reads.
func TestWriteQueuedLeavesNothingBehind(t *testing.T) {
	conn, peer := tcpPair(t)

	s := New(nil)
	cl := s.NewClient(conn, "t", "sub", false)
	if cl.Net.raw == nil {
		t.Fatal("a TCP connection has no socket to write without waiting")
	}
	// Fill the socket's buffers (the peer does not read yet) until a
	// write that does not wait takes nothing, twice 20 ms apart.
	filler := make([]byte, 64<<10)
	filled := 0
	for full := 0; full < 2 && filled < 256<<20; {
		n := cl.Net.raw.writeNow(filler)
		filled += n
		if n == 0 {
			full++
			time.Sleep(20 * time.Millisecond)
		}
	}

	cl.Properties.ProtocolVersion = 4
	// Larger than whatever room the socket has left.
	payload := append(bytes.Repeat([]byte{'.'}, 100<<10), "the tail"...)
	pk := &packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Publish},
		TopicName:   "held/x",
		Payload:     payload,
	}
	if _, start := cl.State.outbound.push(pk); !start {
		t.Fatal("no writer's role to take")
	}
	cl.writeQueued() // as a reader holding the role does

	_ = peer.SetReadDeadline(time.Now().Add(waitTimeout))
	got, err := io.ReadAll(io.LimitReader(peer, int64(filled+4+2+len("held/x")+len(payload))))
	if err != nil {
		t.Fatalf("after %d bytes: %v", len(got), err)
	}
	if !bytes.HasSuffix(got, payload) {
		t.Fatalf("the packet queued behind a full socket did not arrive whole: %d bytes read of %d filled, ending %q",
			len(got), filled, got[max(0, len(got)-16):])
	}
	waitWritten(t, cl)
}
