// SPDX-License-Identifier: MIT

package mqttcore

import (
	"io"
	"sync"
	"time"
)

// connReader is a client's buffered reader that holds a full-size buffer
// only while data arrives in bulk. [iotq patch 12]
//
// Upstream gave every client a bufio.Reader of ClientNetReadBufferSize
// bytes for its whole life, and an idle client's read goroutine sits in
// Read on that buffer. connReader waits on a small buffer of its own
// (connReaderSmall bytes); when one read fills it, the following reads use
// a full-size buffer taken from a pool shared by the server's clients, which
// goes back to the pool once it is drained after a read that would have fit
// the small one. Under load reads come back full and the big buffer stays;
// an idle client holds only the small one. Like bufio.Reader, reads larger
// than the buffer go straight into the caller's slice.
type connReader struct {
	rd    io.Reader
	pool  *sync.Pool // of *[]byte of size bytes
	size  int
	big   *[]byte // from pool, or nil
	small []byte
	buf   []byte  // big or small
	r, w  int     // buf[r:w] is unread
	last  int     // bytes returned by the last read from rd
	owner *Client // its deliveries are written before any read from rd, which may wait; nil: none [iotq patch 40]
	// readAt is when the last read from rd that returned data returned,
	// in Unix seconds (0: none yet): the arrival time of the packets it
	// brought, read once per read rather than once per packet. [iotq patch 45]
	readAt int64
	// raw reads the socket under rd without waiting (fillNow); nil: not
	// a plain socket. A read that finds data needs no deadline. [iotq patch 46]
	raw rawWriter
	// counted is told the bytes fillNow read past rd (whose Read may
	// count them); nil: none. [iotq patch 46]
	counted DirectReadCounter
}

// DirectReadCounter is a connection that counts the bytes read from it and
// is told about those the engine read from its socket (SyscallConn)
// without calling its Read. [iotq patch 46]
type DirectReadCounter interface {
	ReadDirectly(n int)
}

// connReaderSmall is the buffer an idle client keeps; a CONNECT, SUBSCRIBE
// or PUBLISH with a short topic and payload fits.
const connReaderSmall = 256

func newConnReader(rd io.Reader, pool *sync.Pool, size int) *connReader {
	if size < connReaderSmall {
		size = connReaderSmall
	}
	return &connReader{rd: rd, pool: pool, size: size}
}

// newReadBufferPool returns the pool of full-size read buffers.
func newReadBufferPool(size int) *sync.Pool {
	if size < connReaderSmall {
		size = connReaderSmall
	}
	return &sync.Pool{New: func() any { b := make([]byte, size); return &b }}
}

// maxEmptyReads bounds the reads in a row that return no data and no
// error before fill gives up with io.ErrNoProgress (bufio's limit).
const maxEmptyReads = 100

// pickBuffer empties the buffer and chooses which one the next read fills.
func (c *connReader) pickBuffer() {
	c.r, c.w = 0, 0
	if c.big != nil && c.last < connReaderSmall {
		c.pool.Put(c.big) // light traffic: wait on the small buffer
		c.big = nil
	}
	if c.big != nil {
		c.buf = *c.big
	} else {
		if c.small == nil {
			c.small = make([]byte, connReaderSmall)
		}
		c.buf = c.small
	}
}

// filled records a read of n bytes into the buffer pickBuffer chose.
func (c *connReader) filled(n int) {
	c.w, c.last = n, n
	if n > 0 {
		c.readAt = time.Now().Unix()
	}
	if n == len(c.buf) && c.big == nil {
		// The small buffer came back full: more is likely waiting.
		c.big = c.pool.Get().(*[]byte)
		if len(*c.big) != c.size {
			b := make([]byte, c.size)
			c.big = &b
		}
		copy(*c.big, c.buf[:n])
		c.buf = *c.big
	}
}

// fillNow fills the empty buffer with what the socket holds now, without
// waiting, and reports whether it got anything. The reader calls it
// before it prepares a read that may wait (keep-alive deadline, parking):
// while a publisher streams, data is usually there already, and the read
// costs one system call instead of that and two deadline changes. Nothing
// there, the peer gone or an error: false, and the blocking read meets
// whichever it was. [iotq patch 46]
func (c *connReader) fillNow() bool {
	if c.raw == nil || c.r != c.w {
		return false
	}
	c.pickBuffer()
	n := c.raw.readNow(c.buf)
	if n == 0 {
		// Nothing yet: the buffer stays chosen by the last read that
		// brought data. Recording this empty one made the next read use
		// the small buffer, and under load each read brought less.
		return false
	}
	c.filled(n)
	if c.counted != nil {
		c.counted.ReadDirectly(n)
	}
	return true
}

// fill reads once from rd into an empty buffer, choosing the buffer first.
func (c *connReader) fill() error {
	c.beforeRead()
	c.pickBuffer()
	// io.Reader allows (0, nil); a WebSocket conn returns it when the
	// previous read ended exactly at a message's end. Retry as bufio does:
	// failing at once disconnected a client whose packet filled one
	// WebSocket message of 256 bytes. [iotq patch 21]
	var n int
	var err error
	for empty := 0; ; empty++ {
		n, err = c.rd.Read(c.buf)
		if n > 0 || err != nil || empty == maxEmptyReads {
			break
		}
	}
	c.filled(n)
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// beforeRead writes the deliveries the owner's reader holds (patch 40):
// a read from rd may wait, for the rest of a packet too.
func (c *connReader) beforeRead() {
	if c.owner != nil {
		c.owner.writeDeliveries()
	}
}

// ReadByte reads one byte.
func (c *connReader) ReadByte() (byte, error) {
	for c.r == c.w {
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
	b := c.buf[c.r]
	c.r++
	return b, nil
}

// Read reads up to len(p) bytes.
func (c *connReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if c.r == c.w {
		if len(p) >= c.size {
			c.beforeRead()
			n, err := c.rd.Read(p) // large read: skip the copy
			if n > 0 {
				c.readAt = time.Now().Unix()
			}
			return n, err
		}
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, c.buf[c.r:c.w])
	c.r += n
	return n, nil
}

// buffered returns the number of bytes read from rd and not yet returned.
// [iotq patch 18]
func (c *connReader) buffered() int { return c.w - c.r }

// idle drops both buffers while nothing is buffered (a parked client); the
// next read allocates the small one again. [iotq patch 18]
func (c *connReader) idle() {
	if c.r != c.w {
		return
	}
	if c.big != nil {
		c.pool.Put(c.big)
		c.big = nil
	}
	c.small, c.buf = nil, nil
	c.r, c.w, c.last = 0, 0, 0
}

// release returns the big buffer to the pool; the reader must not be used
// afterwards.
func (c *connReader) release() {
	if c.big != nil {
		c.pool.Put(c.big)
		c.big, c.buf = nil, nil
	}
	c.small = nil
}
