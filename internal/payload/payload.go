package payload

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// HeaderSize is the size of the basic version 1 header and the smallest
// payload Encode can produce.
const HeaderSize = 16

// RunHeaderSize is the size of the header with a run id (header length 24):
// written whenever the payload has room for it.
const RunHeaderSize = 24

// Version is the header version written by Encode.
const Version = 1

// magic0 and magic1 are the first two bytes of every measurement payload.
const (
	magic0 = 'I'
	magic1 = 'Q'
)

// Errors returned by Decode and Encode.
var (
	// ErrNotMeasurement means the payload does not start with the magic
	// bytes: it is an ordinary message, not a measurement payload.
	ErrNotMeasurement = errors.New("not a measurement payload")
	// ErrMalformed means the magic matched but the header is broken
	// (truncated, unknown version, bad header length).
	ErrMalformed = errors.New("malformed measurement payload")
	// ErrTooSmall means the requested size cannot hold the header.
	ErrTooSmall = errors.New("payload size too small for the measurement header")
)

// Header is the decoded measurement header.
type Header struct {
	Seq    uint32 // sequence number, as chosen by the publisher
	SendNs int64  // send time, Unix nanoseconds
	// RunID identifies one publisher run (random, not 0), so that two runs
	// that reuse sequence numbers are told apart. 0 means unknown: the
	// payload was shorter than RunHeaderSize or written before run ids.
	RunID uint64
}

// NewRunID returns a random non-zero run id.
func NewRunID() uint64 {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return uint64(time.Now().UnixNano()) | 1
		}
		if id := binary.BigEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}

// SendTime returns the send time as a time.Time.
func (h Header) SendTime() time.Time { return time.Unix(0, h.SendNs) }

// Encode returns a payload of exactly size bytes that carries h. It fails
// with ErrTooSmall when size < HeaderSize.
func Encode(h Header, size int) ([]byte, error) {
	if size < HeaderSize {
		return nil, fmt.Errorf("%w: size %d bytes, minimum is %d", ErrTooSmall, size, HeaderSize)
	}
	b := make([]byte, size)
	Put(b, h)
	return b, nil
}

// Put writes the header into the start of b and leaves the rest of b
// untouched: RunHeaderSize bytes when h.RunID is set and b has room,
// else HeaderSize bytes (no run id). It panics if len(b) < HeaderSize (a
// programming error: check the size with Encode or CheckSize first).
func Put(b []byte, h Header) {
	_ = b[HeaderSize-1]
	hl := byte(HeaderSize)
	if h.RunID != 0 && len(b) >= RunHeaderSize {
		hl = RunHeaderSize
		binary.BigEndian.PutUint64(b[16:24], h.RunID)
	}
	b[0], b[1], b[2], b[3] = magic0, magic1, Version, hl
	binary.BigEndian.PutUint32(b[4:8], h.Seq)
	binary.BigEndian.PutUint64(b[8:16], uint64(h.SendNs))
}

// CheckSize reports whether a payload of size bytes can carry the header,
// with an error that says the minimum.
func CheckSize(size int) error {
	if size < HeaderSize {
		return fmt.Errorf("%w: size %d bytes, minimum is %d", ErrTooSmall, size, HeaderSize)
	}
	return nil
}

// Decode parses the header at the start of b. It returns ErrNotMeasurement
// (wrapped) when b does not start with the magic bytes and ErrMalformed when
// it does but the header is broken. It never panics.
func Decode(b []byte) (Header, error) {
	if len(b) < 2 || b[0] != magic0 || b[1] != magic1 {
		return Header{}, ErrNotMeasurement
	}
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("%w: %d bytes, header needs %d", ErrMalformed, len(b), HeaderSize)
	}
	if b[2] != Version {
		return Header{}, fmt.Errorf("%w: version %d, want %d", ErrMalformed, b[2], Version)
	}
	if hl := int(b[3]); hl < HeaderSize || hl > len(b) {
		return Header{}, fmt.Errorf("%w: header length %d outside %d..%d", ErrMalformed, hl, HeaderSize, len(b))
	}
	h := Header{
		Seq:    binary.BigEndian.Uint32(b[4:8]),
		SendNs: int64(binary.BigEndian.Uint64(b[8:16])),
	}
	if int(b[3]) >= RunHeaderSize {
		h.RunID = binary.BigEndian.Uint64(b[16:24])
	}
	return h, nil
}

// IsMeasurement reports whether b carries a valid measurement header.
func IsMeasurement(b []byte) bool {
	_, err := Decode(b)
	return err == nil
}
