package link

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// LinkTypeRaw is the pcap link type of our captures: raw IP, no link-layer
// header (LINKTYPE_RAW).
const LinkTypeRaw = 101

// PcapWriter writes a classic pcap file with nanosecond timestamps and raw
// IP packets, which Wireshark and tshark read. Safe for concurrent use.
type PcapWriter struct {
	mu      sync.Mutex
	w       *bufio.Writer
	c       io.Closer
	snaplen int
	hdr     [16]byte
	n       int
	err     error
}

// NewPcapWriter writes the file header to w and returns the writer. Close
// flushes and closes w if it is an io.Closer.
func NewPcapWriter(w io.Writer, snaplen int) (*PcapWriter, error) {
	if snaplen <= 0 {
		snaplen = 65535
	}
	p := &PcapWriter{w: bufio.NewWriterSize(w, 64<<10), snaplen: snaplen}
	if c, ok := w.(io.Closer); ok {
		p.c = c
	}
	var h [24]byte
	binary.LittleEndian.PutUint32(h[0:], 0xa1b23c4d) // nanosecond magic
	binary.LittleEndian.PutUint16(h[4:], 2)
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[16:], uint32(snaplen))
	binary.LittleEndian.PutUint32(h[20:], LinkTypeRaw)
	if _, err := p.w.Write(h[:]); err != nil {
		return nil, fmt.Errorf("pcap header: %w", err)
	}
	return p, nil
}

// CreatePcap creates (truncates) the file at path and writes the header.
func CreatePcap(path string) (*PcapWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("pcap: %w", err)
	}
	p, err := NewPcapWriter(f, 0)
	if err != nil {
		f.Close()
		return nil, err
	}
	return p, nil
}

// WritePacket appends one packet captured at ts.
func (p *PcapWriter) WritePacket(ts time.Time, pkt []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	incl := min(len(pkt), p.snaplen)
	ns := ts.UnixNano()
	binary.LittleEndian.PutUint32(p.hdr[0:], uint32(ns/1e9))
	binary.LittleEndian.PutUint32(p.hdr[4:], uint32(ns%1e9))
	binary.LittleEndian.PutUint32(p.hdr[8:], uint32(incl))
	binary.LittleEndian.PutUint32(p.hdr[12:], uint32(len(pkt)))
	if _, err := p.w.Write(p.hdr[:]); err != nil {
		p.err = fmt.Errorf("pcap write: %w", err)
		return p.err
	}
	if _, err := p.w.Write(pkt[:incl]); err != nil {
		p.err = fmt.Errorf("pcap write: %w", err)
		return p.err
	}
	p.n++
	return nil
}

// Packets returns how many packets were written.
func (p *PcapWriter) Packets() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// Close flushes the buffer and closes the underlying writer. Idempotent.
func (p *PcapWriter) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w == nil {
		return nil
	}
	err := p.w.Flush()
	p.w = nil
	if p.err == nil {
		p.err = ErrClosed
	}
	if p.c != nil {
		if cerr := p.c.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("pcap close: %w", err)
	}
	return nil
}
