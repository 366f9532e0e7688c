package pcap

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
)

// Link types understood by the reader.
const (
	LinkTypeEthernet = 1
	LinkTypeRaw      = 101
	LinkTypeIPv4     = 228
	LinkTypeIPv6     = 229
)

const (
	magicMicro = 0xa1b2c3d4
	magicNano  = 0xa1b23c4d
	// maxSnap bounds a record so a corrupt file cannot make us allocate
	// gigabytes.
	maxSnap = 256 * 1024
)

// ErrNotPcap says the input does not start with a pcap file header.
var ErrNotPcap = errors.New("not a pcap file")

// Packet is one captured packet.
type Packet struct {
	// TimeNs is the capture time in Unix nanoseconds.
	TimeNs int64
	// Len is the packet's length on the wire (orig_len).
	Len int
	// Src and Dst are the IP addresses, invalid when the packet is not IP.
	Src, Dst netip.Addr
	// Proto is the IP protocol (6 TCP, 17 UDP; IPv6 extension headers are
	// not followed). SrcPort and DstPort are set for TCP and UDP.
	Proto            uint8
	SrcPort, DstPort uint16
}

// Reader reads packets one at a time.
type Reader struct {
	r        *bufio.Reader
	order    binary.ByteOrder
	nano     bool
	LinkType uint32
	hdr      [16]byte
	buf      []byte
}

// NewReader reads the file header from r.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReader(r)
	var h [24]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return nil, fmt.Errorf("read pcap header: %w", ErrNotPcap)
	}
	rd := &Reader{r: br}
	switch {
	case binary.LittleEndian.Uint32(h[:4]) == magicMicro:
		rd.order = binary.LittleEndian
	case binary.LittleEndian.Uint32(h[:4]) == magicNano:
		rd.order, rd.nano = binary.LittleEndian, true
	case binary.BigEndian.Uint32(h[:4]) == magicMicro:
		rd.order = binary.BigEndian
	case binary.BigEndian.Uint32(h[:4]) == magicNano:
		rd.order, rd.nano = binary.BigEndian, true
	default:
		return nil, fmt.Errorf("magic %#x: %w", h[:4], ErrNotPcap)
	}
	rd.LinkType = rd.order.Uint32(h[20:24]) & 0x0fffffff
	switch rd.LinkType {
	case LinkTypeEthernet, LinkTypeRaw, LinkTypeIPv4, LinkTypeIPv6:
	default:
		return nil, fmt.Errorf("pcap link type %d not supported (want RAW 101, IPv4 228, IPv6 229 or Ethernet 1)", rd.LinkType)
	}
	return rd, nil
}

// Next returns the next packet, or io.EOF at the end of the file. A file cut
// off in the middle of a record returns io.ErrUnexpectedEOF.
func (rd *Reader) Next() (Packet, error) {
	if _, err := io.ReadFull(rd.r, rd.hdr[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return Packet{}, io.EOF
		}
		return Packet{}, fmt.Errorf("read pcap record header: %w", err)
	}
	sec := int64(rd.order.Uint32(rd.hdr[0:4]))
	frac := int64(rd.order.Uint32(rd.hdr[4:8]))
	incl := rd.order.Uint32(rd.hdr[8:12])
	orig := rd.order.Uint32(rd.hdr[12:16])
	if incl > maxSnap {
		return Packet{}, fmt.Errorf("pcap record of %d bytes exceeds %d: corrupt file", incl, maxSnap)
	}
	if cap(rd.buf) < int(incl) {
		rd.buf = make([]byte, incl)
	}
	data := rd.buf[:incl]
	if _, err := io.ReadFull(rd.r, data); err != nil {
		return Packet{}, fmt.Errorf("read pcap record: %w", io.ErrUnexpectedEOF)
	}
	if !rd.nano {
		frac *= 1000
	}
	p := Packet{TimeNs: sec*1e9 + frac, Len: int(orig)}
	if rd.LinkType == LinkTypeEthernet {
		if len(data) < 14 {
			return p, nil
		}
		data = data[14:]
	}
	parseIP(&p, data)
	return p, nil
}

func parseIP(p *Packet, b []byte) {
	if len(b) < 1 {
		return
	}
	var l4 []byte
	switch b[0] >> 4 {
	case 4:
		if len(b) < 20 {
			return
		}
		p.Src = netip.AddrFrom4([4]byte(b[12:16]))
		p.Dst = netip.AddrFrom4([4]byte(b[16:20]))
		p.Proto = b[9]
		ihl := int(b[0]&0x0f) * 4
		frag := binary.BigEndian.Uint16(b[6:8]) & 0x1fff
		if ihl >= 20 && len(b) >= ihl && frag == 0 {
			l4 = b[ihl:]
		}
	case 6:
		if len(b) < 40 {
			return
		}
		p.Src = netip.AddrFrom16([16]byte(b[8:24]))
		p.Dst = netip.AddrFrom16([16]byte(b[24:40]))
		p.Proto = b[6]
		l4 = b[40:]
	}
	if (p.Proto == 6 || p.Proto == 17) && len(l4) >= 4 {
		p.SrcPort = binary.BigEndian.Uint16(l4[0:2])
		p.DstPort = binary.BigEndian.Uint16(l4[2:4])
	}
}

// ReadFile reads every packet of a pcap file.
func ReadFile(path string) ([]Packet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rd, err := NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []Packet
	for {
		p, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("%s: packet %d: %w", path, len(out)+1, err)
		}
		out = append(out, p)
	}
}

// Writer writes a nanosecond-resolution little-endian pcap file with
// LINKTYPE_RAW.
type Writer struct {
	w   io.Writer
	err error
}

// NewWriter writes the file header.
func NewWriter(w io.Writer) (*Writer, error) {
	var h [24]byte
	binary.LittleEndian.PutUint32(h[0:], magicNano)
	binary.LittleEndian.PutUint16(h[4:], 2)
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[16:], 65535)
	binary.LittleEndian.PutUint32(h[20:], LinkTypeRaw)
	if _, err := w.Write(h[:]); err != nil {
		return nil, fmt.Errorf("write pcap header: %w", err)
	}
	return &Writer{w: w}, nil
}

// WritePacket writes one IP packet captured at timeNs.
func (pw *Writer) WritePacket(timeNs int64, data []byte) error {
	if pw.err != nil {
		return pw.err
	}
	var h [16]byte
	binary.LittleEndian.PutUint32(h[0:], uint32(timeNs/1e9))
	binary.LittleEndian.PutUint32(h[4:], uint32(timeNs%1e9))
	binary.LittleEndian.PutUint32(h[8:], uint32(len(data)))
	binary.LittleEndian.PutUint32(h[12:], uint32(len(data)))
	if _, err := pw.w.Write(h[:]); err != nil {
		pw.err = fmt.Errorf("write pcap record: %w", err)
		return pw.err
	}
	if _, err := pw.w.Write(data); err != nil {
		pw.err = fmt.Errorf("write pcap record: %w", err)
	}
	return pw.err
}

// IPv4Packet builds a minimal IPv4 packet of total length n (at least 28)
// from src to dst with protocol proto (17 UDP, 6 TCP) and the given ports;
// the rest of the payload is zero. It exists for tests and fixtures.
func IPv4Packet(src, dst netip.Addr, proto byte, sport, dport uint16, n int) []byte {
	n = max(n, 28)
	b := make([]byte, n)
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], uint16(n))
	b[8] = 64
	b[9] = proto
	s, d := src.As4(), dst.As4()
	copy(b[12:16], s[:])
	copy(b[16:20], d[:])
	binary.BigEndian.PutUint16(b[20:], sport)
	binary.BigEndian.PutUint16(b[22:], dport)
	return b
}
