// SPDX-License-Identifier: MIT

package mqttcore

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/iotq/iotq/internal/mqttcore/packets"
)

// Deliveries written by the reader that routed them. [iotq patch 40]
//
// A message routed to a subscriber whose outbound queue had no writer
// started a write goroutine for it (patch 11), which usually found one
// packet and wrote it with a system call of its own: at 1 -> 1, a
// goroutine start, a wake-up of an idle thread and a write per message.
// Now the reader handling the publisher's input takes the writer's role
// for such a subscriber itself and lists it (deliveryBatch). Before the
// reader waits for input it writes them (writeDeliveries): every packet
// queued meanwhile, encoded into one buffer and written with one system
// call that does not wait, when the subscriber's connection is a plain
// socket. What the socket does not take at once, and subscribers on TLS,
// WebSocket or QUIC, go to a write goroutine, in order. So a delivery
// waits no longer than the handling of the input already received, as
// the reader's own answers do (patch 31).
//
// Nothing the reader does may wait while it holds writers' roles: a
// subscriber would wait for another client's input. Before any wait the
// roles go to write goroutines (release): a blocking write to the
// reader's own connection (writePacket, flushOutbuf), a full queue
// (OutboundFull, QueuedBytesFull), a hook that holds the publisher back
// (ReleaseWrites, patch 51), a DISCONNECT's wait for its
// acknowledgements, and the end of the reader (read's defer).

// inlineWriteMax bounds what a reader encodes for one subscriber before
// it hands the rest of the queue to a write goroutine.
const inlineWriteMax = 32 << 10

// deliveryBatch lists the subscribers whose writer's role a client's
// reader holds. add and release may be called from any goroutine; begin,
// pending, writeDeliveries and end only by the reader.
type deliveryBatch struct {
	mu      sync.Mutex
	n       atomic.Int32 // len(clients)
	open    bool         // the reader handles input and will write the list (written by the reader under mu)
	clients []*Client    // subscribers whose writer's role the reader holds
	spare   []*Client    // the reader's previous list, emptied for reuse (reader only)
}

// begin opens the batch: the reader is about to handle input.
func (b *deliveryBatch) begin() {
	if b.open {
		return
	}
	b.mu.Lock()
	b.open = true
	if b.clients == nil {
		b.clients, b.spare = b.spare, nil
	}
	b.mu.Unlock()
}

// add lists sc, whose writer's role the caller holds, and reports false
// if the batch is not open: the caller must start sc's writer itself.
func (b *deliveryBatch) add(sc *Client) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		return false
	}
	b.clients = append(b.clients, sc)
	b.n.Store(int32(len(b.clients)))
	return true
}

// pending reports whether subscribers are listed.
func (b *deliveryBatch) pending() bool { return b.n.Load() > 0 }

// take empties the list and returns it; with close, the batch closes.
func (b *deliveryBatch) take(close bool) []*Client {
	b.mu.Lock()
	defer b.mu.Unlock()
	if close {
		b.open = false
	}
	list := b.clients
	b.clients = nil
	b.n.Store(0)
	return list
}

// release starts a write goroutine for every listed subscriber: whoever
// holds the list is about to wait.
func (b *deliveryBatch) release() {
	if b.n.Load() == 0 {
		return
	}
	for _, sc := range b.take(false) {
		go sc.WriteLoop()
	}
}

// ReleaseWrites hands the subscribers whose writing cl's reader holds
// to write goroutines. A hook that may wait on cl's reader (OnPublish
// holding a publisher back until a subscriber makes progress) calls it
// first: the subscriber's queued packets would otherwise wait for the
// reader, which waits for them. [iotq patch 51]
func (cl *Client) ReleaseWrites() { cl.State.deliveries.release() }

// end closes the batch and releases the list: the reader returns.
func (b *deliveryBatch) end() {
	b.mu.Lock()
	b.open = false
	b.mu.Unlock()
	b.release()
}

// writeDeliveries writes the listed subscribers' queues and closes the
// batch: the reader is about to wait for input. Called by the reader only.
func (cl *Client) writeDeliveries() {
	b := &cl.State.deliveries
	if !b.open {
		return
	}
	list := b.take(true)
	for i, sc := range list {
		sc.writeQueued()
		list[i] = nil
	}
	b.spare = list[:0]
}

// writeQueued writes what cl's outbound queue holds, on the goroutine of
// a reader that holds cl's writer's role: encoded into one buffer and
// written by one system call that does not wait. Whatever is left (the
// socket's buffer was full, more than inlineWriteMax was queued, the
// connection is no plain socket, or cl's own goroutines are writing to
// it) goes to a write goroutine, which takes the role over.
func (cl *Client) writeQueued() {
	if cl.Net.raw == nil || cl.Closed() {
		go cl.WriteLoop()
		return
	}
	buf := cl.ops.getBuffer()
	var now unixNow // one clock reading for the batch [iotq patch 45]
	for buf.Len() < inlineWriteMax {
		pk, ok := cl.State.outbound.popHeld()
		if !ok {
			break
		}
		cl.encodeQueued(pk, buf, &now)
	}
	if !cl.TryLock() {
		// Another goroutine writes to cl's connection, perhaps waiting
		// on its socket: the reader must not wait behind it.
		go func() {
			cl.Lock()
			cl.appendOut(buf)
			cl.Unlock()
			cl.WriteLoop()
		}()
		return
	}
	if cl.Net.outbuf != nil && cl.Net.outbuf.Len() == 0 {
		cl.ops.putBuffer(cl.Net.outbuf)
		cl.Net.outbuf = nil
	}
	cl.appendOut(buf) // behind any bytes an earlier write left
	out := cl.Net.outbuf
	n := cl.Net.raw.writeNow(out.Bytes())
	out.Next(n)
	if n > 0 {
		if w, ok := cl.Net.Conn.(DirectWriteCounter); ok {
			w.WrittenDirectly(n)
		}
	}
	left := out.Len() > 0
	if !left {
		cl.ops.putBuffer(out)
		cl.Net.outbuf = nil
	}
	cl.Unlock()
	if left || !cl.State.outbound.endHeld() {
		go cl.WriteLoop()
	}
}

// appendOut puts buf's bytes at the end of cl's output buffer and gives
// buf back to the pool. The caller holds cl's lock.
func (cl *Client) appendOut(buf *bytes.Buffer) {
	if cl.Net.outbuf == nil {
		cl.Net.outbuf = buf
		return
	}
	_, _ = cl.Net.outbuf.Write(buf.Bytes())
	cl.ops.putBuffer(buf)
}

// encodeQueued encodes pk, taken from cl's outbound queue, into buf and
// accounts for it as WriteLoop does for a packet it writes.
func (cl *Client) encodeQueued(pk *packets.Packet, buf *bytes.Buffer, now *unixNow) {
	if !cl.stillInFlight(pk) { // [iotq patch 59]
		cl.sent(pk)
		return
	}
	start := buf.Len()
	sent := *pk // queued packets may be shared by subscribers (patch 33)
	if err := cl.encodePacket(&sent, buf, now); err != nil {
		cl.ops.log.Debug("failed publishing packet", "error", err, "client", cl.ID, "packet", pk)
	} else {
		cl.countSent(&sent, int64(buf.Len()-start), buf.Bytes()[start:])
	}
	cl.sent(pk)
}

// flushLeft writes what a reader's write left in cl's output buffer
// (writeQueued). Called by WriteLoop before it writes the queue.
func (cl *Client) flushLeft() {
	cl.Lock()
	defer cl.Unlock()
	if cl.Net.outbuf != nil && cl.Net.outbuf.Len() > 0 {
		_ = cl.flushOutbuf()
	}
}

// DirectWriteCounter is a connection that counts the bytes it writes and
// is told about those the engine wrote to its socket (SyscallConn)
// without calling its Write. [iotq patch 40]
type DirectWriteCounter interface {
	WrittenDirectly(n int)
}
