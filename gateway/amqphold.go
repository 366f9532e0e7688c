package gateway

import "encoding/binary"

// amqpHoldScan bounds how far amqpBeforeTransfer looks for the first
// transfer: the transport's 0-RTT budget (8 KiB) plus headroom. A client
// that sent no transfer by then (a receiver, or a client that waits for
// the broker's answers) has its later bytes forwarded once the handshake
// completed, which it long has by then.
const amqpHoldScan = 16 << 10

// amqpBeforeTransfer is the transport.FirstMessageFunc of policy hold for
// ALPN amqp: the "first message" is everything before the first transfer
// frame, that is the protocol headers, SASL, open, begin and attach of a
// client that pipelines its start (iotq pub --early). They are forwarded
// at once, even as 0-RTT data; the transfer and what follows wait for the
// handshake, so a replayed first flight opens a connection and a link but
// delivers no message. The first bytes of the transfer frame (its
// header and descriptor, read to recognise it) may pass: an incomplete
// frame that the broker cannot act on. Invalid framing counts as the end
// of the first message: everything after it is held.
func amqpBeforeTransfer(prefix []byte) (total, more int) {
	at := 0
	for {
		if at >= amqpHoldScan {
			return at, 0
		}
		rest := prefix[at:]
		if len(rest) < 8 {
			return 0, 8 - len(rest)
		}
		if string(rest[:4]) == "AMQP" {
			at += 8
			continue
		}
		size := int(binary.BigEndian.Uint32(rest))
		doff := int(rest[4]) * 4
		if size < 8 || doff < 8 || doff > size || size > amqpHoldScan {
			return len(prefix), 0
		}
		if rest[5] == 0 && size >= doff+3 { // an AMQP frame with a body
			if len(rest) < doff+3 {
				return 0, doff + 3 - len(rest)
			}
			var code uint64 = 0xff // unknown
			switch {
			case rest[doff] != 0: // not a described type
			case rest[doff+1] == 0x53: // small ulong descriptor
				code = uint64(rest[doff+2])
			case rest[doff+1] == 0x80 && size >= doff+10: // ulong descriptor
				if len(rest) < doff+10 {
					return 0, doff + 10 - len(rest)
				}
				code = binary.BigEndian.Uint64(rest[doff+2:])
			}
			if code == 0x14 { // transfer
				if at == 0 {
					// A transfer before anything else, not even a
					// protocol header: invalid AMQP. The first message
					// cannot be empty (0, 0 tells nothing: HoldAfterFirst
					// then passed the whole stream a byte at a time, the
					// transfer too, and kept it all as the prefix), so
					// the bytes read to recognise the transfer end it, as
					// invalid framing does: what follows is held.
					return len(prefix), 0
				}
				return at, 0
			}
		}
		if len(rest) < size {
			return 0, size - len(rest)
		}
		at += size
	}
}
