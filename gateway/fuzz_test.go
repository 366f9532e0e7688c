package gateway

// Fuzz target for the gateway's own parsing of a device's bytes:
// amqpBeforeTransfer, the FirstMessageFunc that decides which bytes of an
// AMQP connection's 0-RTT flight reach the broker before the QUIC
// handshake completes. (The gateway writes PROXY protocol v2 headers but
// parses none; everything else it forwards unread.) Seeds are pipelined
// starts as client/amqp writes them and edge cases; crashers found so far
// are kept in testdata/fuzz.
//
//	go test ./gateway -run '^$' -fuzz '^FuzzAMQPBeforeTransfer$' -fuzztime 60s -parallel 1

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// holdRead reads stream as transport.HoldAfterFirst does with first: it
// asks first about the bytes read so far and reads what it asks for,
// until first tells the first message's length. It returns that length
// (0 if the stream ended first) and the bytes read until then, and checks
// the FirstMessageFunc contract on the way: a length or a request for
// more bytes, never both, never neither.
func holdRead(t *testing.T, first func([]byte) (int, int), stream []byte) (total, read int) {
	t.Helper()
	prefix := stream[:0]
	for {
		total, more := first(prefix)
		switch {
		case total > 0 && more != 0:
			t.Fatalf("prefix of %d bytes: total %d and more %d", len(prefix), total, more)
		case total > 0:
			return total, len(prefix)
		case more <= 0:
			t.Fatalf("prefix of %d bytes: total %d, more %d: neither a length nor a request for bytes", len(prefix), total, more)
		case len(prefix)+more > len(stream):
			return 0, len(prefix)
		}
		prefix = stream[:len(prefix)+more]
	}
}

// wholeTransfer reports whether b holds a complete transfer frame when
// read as a sequence of protocol headers and frames from its start (as
// the broker reads it).
func wholeTransfer(b []byte) bool {
	for len(b) >= 8 {
		if string(b[:4]) == "AMQP" {
			b = b[8:]
			continue
		}
		size := int(binary.BigEndian.Uint32(b))
		doff := int(b[4]) * 4
		if size < 8 || doff < 8 || doff > size || size > len(b) {
			return false
		}
		// A transfer: descriptor 0x14 (small ulong or ulong) and at
		// least the first byte of the performative's list.
		body := b[doff:size]
		if b[5] == 0 && len(body) >= 4 && body[0] == 0 &&
			(body[1] == 0x53 && body[2] == 0x14 || body[1] == 0x80 && len(body) >= 11 && binary.BigEndian.Uint64(body[2:]) == 0x14) {
			return true
		}
		b = b[size:]
	}
	return false
}

func FuzzAMQPBeforeTransfer(f *testing.F) {
	hdr := func(id byte) []byte { return []byte{'A', 'M', 'Q', 'P', id, 1, 0, 0} }
	var start []byte
	for _, p := range [][]byte{hdr(3), amqpFrame(1, 0x41, []byte("anon")), hdr(0), amqpFrame(0, 0x10, nil),
		{0, 0, 0, 8, 2, 0, 0, 0}, amqpFrame(0, 0x11, nil), amqpFrame(0, 0x12, bytes.Repeat([]byte{1}, 300))} {
		start = append(start, p...)
	}
	transfer := amqpFrame(0, 0x14, []byte("message"))
	longDesc := []byte{0, 0, 0, 0, 2, 0, 0, 0, 0x00, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x14, 0x45, 'm'}
	binary.BigEndian.PutUint32(longDesc, uint32(len(longDesc)))
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	f.Add(cat(start, transfer, []byte("more")))
	f.Add(cat(start, longDesc))
	f.Add(cat(start, amqpFrame(0, 0x13, nil)))
	f.Add(cat(hdr(0), []byte{0, 0, 0, 3, 2, 0, 0, 0, 1, 2})) // bad frame size
	f.Add(cat(hdr(0), []byte{0, 0, 0, 12, 3, 0, 0, 0, 0, 0x53, 0x14, 0x45}))
	f.Add(cat(hdr(0), []byte{0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0}))
	f.Add(transfer) // a transfer before any protocol header
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, stream []byte) {
		total, read := holdRead(t, amqpBeforeTransfer, stream)
		if read > 2*amqpHoldScan+8 {
			t.Fatalf("read %d bytes to find the first message", read)
		}
		if total == 0 {
			return
		}
		passed := max(total, read) // what HoldAfterFirst hands on before the handshake
		if total > 2*amqpHoldScan+8 {
			t.Fatalf("first message of %d bytes", total)
		}
		if passed <= len(stream) && wholeTransfer(stream[:passed]) {
			t.Fatalf("a whole transfer frame is in the %d bytes passed before the handshake", passed)
		}
	})
}

// TestAMQPTransferFirst: a stream that starts with a transfer frame (no
// protocol header: invalid AMQP) ends its first message where the bytes
// read to recognise it end. amqpBeforeTransfer returned (0, 0), which
// tells HoldAfterFirst nothing: it then read the stream a byte at a time,
// passed all of it before the handshake and kept it all as the prefix
// (found by FuzzAMQPBeforeTransfer; testdata/fuzz keeps it).
func TestAMQPTransferFirst(t *testing.T) {
	tr := amqpFrame(0, 0x14, []byte("message"))
	if total, more := amqpBeforeTransfer(tr[:11]); total != 11 || more != 0 {
		t.Fatalf("total %d, more %d; want 11, 0", total, more)
	}
	long := []byte{0, 0, 0, 20, 2, 0, 0, 0, 0x00, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x14, 0x45, 'm'}
	if total, more := amqpBeforeTransfer(long[:18]); total != 18 || more != 0 {
		t.Fatalf("ulong descriptor: total %d, more %d; want 18, 0", total, more)
	}
}
