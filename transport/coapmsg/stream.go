package coapmsg

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/plgd-dev/go-coap/v3/message"
	tcpcoder "github.com/plgd-dev/go-coap/v3/tcp/coder"
)

// DefaultMaxMessageSize is the Max-Message-Size of RFC 8323 section 5.3.1.
const DefaultMaxMessageSize = 1152

// ReadStreamMessage reads one RFC 8323 message (CoAP over TCP, TLS or a
// QUIC stream) from r. Messages longer than max bytes fail.
func ReadStreamMessage(r *bufio.Reader, max int) (*message.Message, error) {
	first, err := r.ReadByte()
	if err != nil {
		return nil, err
	}
	lenNib, tkl := int(first>>4), int(first&0x0f)
	if tkl > 8 {
		return nil, fmt.Errorf("coap stream: token length %d: %w", tkl, message.ErrInvalidTokenLen)
	}
	var ext []byte
	switch lenNib {
	case 13:
		ext = make([]byte, 1)
	case 14:
		ext = make([]byte, 2)
	case 15:
		ext = make([]byte, 4)
	}
	if _, err := io.ReadFull(r, ext); err != nil {
		return nil, fmt.Errorf("coap stream: truncated header: %w", err)
	}
	length := streamLength(lenNib, ext)
	if max < 0 || length > uint64(max) {
		return nil, fmt.Errorf("coap stream: message of %d bytes exceeds the maximum %d", length, max)
	}
	frame, err := readFrame(r, first, ext, 1+len(ext)+1+tkl+int(length))
	if err != nil {
		return nil, err
	}
	m := &message.Message{Options: make(message.Options, 0, 32), MessageID: -1, Type: -1}
	if _, err := tcpcoder.DefaultCoder.Decode(frame, m); err != nil {
		return nil, fmt.Errorf("coap stream: %w", err)
	}
	return m, nil
}

// frameChunk is the most readFrame allocates ahead of the data it has read.
const frameChunk = 64 << 10

// readFrame reads the rest of a frame of total bytes whose header begins
// with first and ext. Its buffer grows with the data that arrived (doubling,
// at most frameChunk ahead of it), not with the length the header declares:
// a 5-byte header declaring 1 MB made the reader allocate the megabyte
// before any of it arrived (found by FuzzReadStreamMessage).
func readFrame(r io.Reader, first byte, ext []byte, total int) ([]byte, error) {
	frame := make([]byte, 1+len(ext), min(total, 1+len(ext)+frameChunk))
	frame[0] = first
	copy(frame[1:], ext)
	for len(frame) < total {
		if len(frame) == cap(frame) {
			frame = slices.Grow(frame, min(total-len(frame), max(len(frame), frameChunk)))
		}
		end := min(total, cap(frame))
		if _, err := io.ReadFull(r, frame[len(frame):end]); err != nil {
			return nil, fmt.Errorf("coap stream: truncated message: %w", err)
		}
		frame = frame[:end]
	}
	return frame, nil
}

// EncodeStream serialises m in RFC 8323 framing.
func EncodeStream(m *message.Message) ([]byte, error) {
	n, err := tcpcoder.DefaultCoder.Size(*m)
	if err != nil {
		return nil, fmt.Errorf("coap stream: encode: %w", err)
	}
	buf := make([]byte, n)
	if _, err := tcpcoder.DefaultCoder.Encode(*m, buf); err != nil {
		return nil, fmt.Errorf("coap stream: encode: %w", err)
	}
	return buf, nil
}

// UnknownCritical reports whether opts hold a critical (odd) option that is
// not known (RFC 7252 section 5.4.1).
func UnknownCritical(opts message.Options) bool { return unknownCritical(opts) }

// StreamFirstMessage tells where the first RFC 8323 message of a stream
// ends (the CSM; a transport.FirstMessageFunc for transport.HoldAfterFirst,
// so a coap+quic listener can process the CSM of a 0-RTT flight at once and
// hold what follows until the handshake completes). Given the first bytes
// of the stream it returns the message's total length, or how many more
// bytes it needs to tell. An invalid token length returns len(prefix): the
// reader rejects it.
func StreamFirstMessage(prefix []byte) (total, more int) {
	if len(prefix) < 1 {
		return 0, 1
	}
	lenNib, tkl := int(prefix[0]>>4), int(prefix[0]&0x0f)
	if tkl > 8 {
		return len(prefix), 0
	}
	extLen := 0
	switch lenNib {
	case 13:
		extLen = 1
	case 14:
		extLen = 2
	case 15:
		extLen = 4
	}
	if len(prefix) < 1+extLen {
		return 0, 1 + extLen - len(prefix)
	}
	total64 := uint64(1+extLen+1+tkl) + streamLength(lenNib, prefix[1:1+extLen])
	if total64 > math.MaxInt {
		// Only on 32-bit platforms: a message no reader accepts (its
		// maximum is an int), so the prefix ends the first message.
		return len(prefix), 0
	}
	return int(total64), 0
}

// streamLength decodes the Len field of an RFC 8323 header (section 3.2):
// the nibble and its extended length bytes give the length of the options
// and payload. It is a uint64: 65805 + 2^32-1 overflows an int on 32-bit
// platforms, where it became a negative length (a makeslice panic in
// ReadStreamMessage and a negative total from StreamFirstMessage).
func streamLength(lenNib int, ext []byte) uint64 {
	switch lenNib {
	case 13:
		return 13 + uint64(ext[0])
	case 14:
		return 269 + uint64(binary.BigEndian.Uint16(ext))
	case 15:
		return 65805 + uint64(binary.BigEndian.Uint32(ext))
	}
	return uint64(lenNib)
}
