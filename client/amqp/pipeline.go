package amqp

// Pipelined connection start (Options.Early): the client writes the start
// of the connection at once, without waiting for any reply: the protocol
// headers (SASL and AMQP), sasl-init, open, begin and attach of one sender
// link. AMQP 1.0 allows it (part 2 section 2.4.1: a client may pipeline
// open and what follows; part 5 section 5.3.1 for SASL); over QUIC with a
// ticket the whole flight leaves as 0-RTT data.
//
// The early message's transfer is not part of the flight: a sender may
// transfer only within the session window the peer's begin announces
// (part 2 section 2.5.6) and the link credit its flow grants (section
// 2.6.7). Proton-C based brokers enforce the window and close a connection
// whose transfer arrives before their begin (amqp:session:window-violation).
// The transfer leaves when the broker's begin, attach and flow arrived,
// one round trip after the flight, as go-amqp's ordinary first transfer.
//
// go-amqp runs its usual start on the same connection, in turn: its
// writes of the frames already sent are swallowed by pipeConn (after a
// check that they say what ours said, so the two views of the connection
// agree: same container, session, link name and handle), and it reads the
// broker's real replies.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"reflect"
	"sync"
	"time"

	"github.com/iotq/iotq/transport"
)

// minMaxFrameSize is the largest frame a peer may send before it has the
// other side's open (AMQP 1.0 part 2 section 2.7.1): every pipelined
// frame stays within it.
const minMaxFrameSize = 512

// maxFrameSize is the max-frame-size this client announces (go-amqp's
// default, set explicitly so that both encoders agree).
const maxFrameSize = 65536

// earlyStart is what the pipelined start sends.
type earlyStart struct {
	sasl        string // "", "ANONYMOUS" or "PLAIN"
	username    string // PLAIN
	password    string // PLAIN
	containerID string
	hostname    string
	idleTimeout time.Duration // our idle timeout; open announces half
	linkName    string
	address     string
	tag         []byte // delivery tag of the early transfer
	payload     []byte
	settled     bool // QoS 0: pre-settled
}

// unit is one protocol header or one frame of the first flight.
type unit struct {
	raw     []byte
	header  bool
	channel uint16
	typ     byte   // frame type
	code    uint64 // performative
	fields  list
}

func (u unit) name() string {
	if u.header {
		return fmt.Sprintf("protocol header %d", u.raw[4])
	}
	return performativeName(u.code)
}

func performativeName(code uint64) string {
	switch code {
	case descSASLInit:
		return "sasl-init"
	case descOpen:
		return "open"
	case descBegin:
		return "begin"
	case descAttach:
		return "attach"
	case descTransfer:
		return "transfer"
	case descDisposition:
		return "disposition"
	case descFlow:
		return "flow"
	}
	return fmt.Sprintf("performative %#x", code)
}

// flight returns the units of the first flight, in order.
func (e *earlyStart) flight() ([]unit, error) {
	var units []unit
	add := func(typ byte, code uint64, fields list, payload []byte) error {
		raw, err := frame(typ, 0, described{code: code, value: fields}, payload)
		if err != nil {
			return err
		}
		units = append(units, unit{raw: raw, typ: typ, code: code, fields: trimNulls(fields)})
		return nil
	}
	if e.sasl != "" {
		units = append(units, unit{raw: protoHeader(3), header: true})
		resp := []byte("anonymous")
		if e.sasl == "PLAIN" {
			resp = []byte("\x00" + e.username + "\x00" + e.password)
		}
		if err := add(frameSASL, descSASLInit, list{symbol(e.sasl), resp}, nil); err != nil {
			return nil, err
		}
	}
	units = append(units, unit{raw: protoHeader(0), header: true})
	var host any
	if e.hostname != "" {
		host = e.hostname
	}
	var idle any
	if ms := uint32((e.idleTimeout / 2).Milliseconds()); ms > 0 {
		idle = ms
	}
	if err := add(frameAMQP, descOpen, list{e.containerID, host, uint32(maxFrameSize), null, idle}, nil); err != nil {
		return nil, err
	}
	if err := add(frameAMQP, descBegin, list{null, uint32(0), uint32(5000), uint32(5000), uint32(1<<32 - 2)}, nil); err != nil {
		return nil, err
	}
	attach := list{e.linkName, uint32(0), false, uint8(2), null,
		described{code: descSource, value: list{}}, described{code: descTarget, value: list{e.address}},
		null, null, uint32(0)}
	if err := add(frameAMQP, descAttach, attach, nil); err != nil {
		return nil, err
	}
	for _, u := range units {
		if len(u.raw) > minMaxFrameSize {
			return nil, fmt.Errorf("the pipelined %s is %d bytes, more than the %d a client may send before the broker's open (a shorter address or link name?)",
				u.name(), len(u.raw), minMaxFrameSize)
		}
	}
	return units, nil
}

// pipeConn is the transport conn as go-amqp sees it during a pipelined
// start. Write side: it swallows go-amqp's writes of what the flight
// already carried, and notes when the first transfer (the early message,
// go-amqp's own) was written. Read side: it hands go-amqp the broker's
// frames whole, and holds back a begin or attach reply until go-amqp has
// "sent" the begin or attach it answers (go-amqp drops replies it does
// not expect yet). Once go-amqp has written the whole flight, both sides
// pass straight through.
type pipeConn struct {
	transport.Conn

	wmu         sync.Mutex // guards the write side
	expect      []unit     // units of the flight go-amqp has not written yet
	swallowed   func(name string)
	onTransfer  func(at time.Time) // once, after the first transfer frame was written
	transferred bool

	rmu     sync.Mutex // guards the read side
	cond    *sync.Cond // on rmu: go-amqp wrote a unit, or Close
	sent    map[uint64]bool
	flushed bool   // go-amqp has written the whole flight
	closed  bool   // Close was called
	in      []byte // read from the conn, not yet handed on; starts at a unit
	ready   int    // bytes at the start of in that go-amqp may have
	rerr    error  // the conn's read error, after in
}

// newPipeConn returns the conn for go-amqp; the flight must have been
// written to c already.
func newPipeConn(c transport.Conn, units []unit) *pipeConn {
	p := &pipeConn{Conn: c, expect: units, sent: map[uint64]bool{}}
	p.cond = sync.NewCond(&p.rmu)
	return p
}

// maxHeld bounds a frame the read side reads whole before handing it on.
const maxHeld = 1 << 20

func (p *pipeConn) Read(b []byte) (int, error) {
	p.rmu.Lock()
	for {
		switch {
		case p.closed:
			p.rmu.Unlock()
			return 0, net.ErrClosed
		case p.ready > 0:
			n := copy(b, p.in[:p.ready])
			p.in, p.ready = p.in[n:], p.ready-n
			p.rmu.Unlock()
			return n, nil
		case p.flushed:
			if len(p.in) > 0 { // the rest, whole units or not
				p.ready = len(p.in)
				continue
			}
			if p.rerr != nil {
				p.rmu.Unlock()
				return 0, p.rerr
			}
			p.rmu.Unlock()
			return p.Conn.Read(b)
		}
		size, err := unitSize(p.in)
		if err != nil {
			p.rmu.Unlock()
			return 0, fmt.Errorf("pipelined AMQP start: from the broker: %w", err)
		}
		if size > 0 && len(p.in) >= size {
			if !p.mayPass(p.in[:size]) {
				p.cond.Wait()
				continue
			}
			p.ready = size
			continue
		}
		if p.rerr != nil {
			p.rmu.Unlock()
			return 0, p.rerr
		}
		p.rmu.Unlock()
		buf := make([]byte, max(len(b), 4096))
		n, err := p.Conn.Read(buf)
		p.rmu.Lock()
		p.in = append(p.in, buf[:n]...)
		if err != nil {
			p.rerr = err
		}
	}
}

// unitSize returns the length of the unit at the start of in, 0 while
// fewer than 8 bytes are there.
func unitSize(in []byte) (int, error) {
	if len(in) < 8 {
		return 0, nil
	}
	if bytes.HasPrefix(in, []byte("AMQP")) {
		return 8, nil
	}
	size := int(binary.BigEndian.Uint32(in))
	if size < 8 || size > maxHeld {
		return 0, fmt.Errorf("frame size %d: want 8 to %d bytes", size, maxHeld)
	}
	return size, nil
}

// mayPass reports whether go-amqp may read the whole unit u now: a begin
// or attach only once go-amqp has written its own. rmu held.
func (p *pipeConn) mayPass(u []byte) bool {
	if len(u) == 8 || u[5] != frameAMQP || binary.BigEndian.Uint16(u[6:]) != 0 {
		return true
	}
	doff := int(u[4]) * 4
	if doff < 8 || doff >= len(u) {
		return true
	}
	code, _, _, err := performative(u[doff:])
	if err != nil {
		return true // go-amqp will say what is wrong
	}
	switch code {
	case descBegin, descAttach:
		return p.flushed || p.sent[code]
	}
	return true
}

// wrote tells the read side that go-amqp wrote unit u of the flight. wmu
// held.
func (p *pipeConn) wrote(u unit) {
	p.rmu.Lock()
	if !u.header {
		p.sent[u.code] = true
	}
	p.flushed = len(p.expect) == 0
	p.cond.Broadcast()
	p.rmu.Unlock()
}

// Close wakes a Read waiting for go-amqp's next write and closes the conn.
func (p *pipeConn) Close() error {
	p.rmu.Lock()
	p.closed = true
	p.cond.Broadcast()
	p.rmu.Unlock()
	return p.Conn.Close()
}

// Write swallows a write of go-amqp that the flight already carried
// (go-amqp writes one protocol header or one frame per call), checking
// that it says the same; everything else goes through.
func (p *pipeConn) Write(b []byte) (int, error) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if len(p.expect) == 0 {
		n, err := p.Conn.Write(b)
		if err == nil && !p.transferred && isTransfer(b) {
			p.transferred = true
			if p.onTransfer != nil {
				p.onTransfer(time.Now())
			}
		}
		return n, err
	}
	got, err := parseUnit(b)
	if err != nil {
		return 0, fmt.Errorf("pipelined AMQP start: go-amqp wrote %d bytes that are not one frame: %w", len(b), err)
	}
	want := p.expect[0]
	switch {
	case want.header != got.header:
		return p.Conn.Write(b) // e.g. an empty frame (keep-alive): not ours
	case want.header:
		if !bytes.Equal(want.raw, got.raw) {
			return 0, fmt.Errorf("pipelined AMQP start: go-amqp wrote %s, the flight had %s", got.name(), want.name())
		}
		p.done(want)
		return len(b), nil
	case got.typ == frameAMQP && got.code == descTransfer:
		return 0, fmt.Errorf("pipelined AMQP start: go-amqp wrote a transfer before the flight's %s", want.name())
	case got.typ != want.typ || got.code != want.code || got.channel != 0:
		return p.Conn.Write(b)
	}
	if err := sameFields(want, got); err != nil {
		return 0, err
	}
	p.done(want)
	return len(b), nil
}

// isTransfer reports whether b starts with an AMQP transfer frame (a
// small-ulong descriptor, as every encoder writes it).
func isTransfer(b []byte) bool {
	if len(b) < 8 || b[5] != frameAMQP {
		return false
	}
	doff := int(b[4]) * 4
	return doff >= 8 && len(b) >= doff+3 && b[doff] == codeDescribed && b[doff+1] == codeSmallUlng && b[doff+2] == descTransfer
}

// done drops the first expected unit. wmu held.
func (p *pipeConn) done(u unit) {
	p.expect = p.expect[1:]
	p.wrote(u)
	if p.swallowed != nil {
		p.swallowed(u.name())
	}
}

// pending returns the names of the flight's units go-amqp has not written.
func (p *pipeConn) pending() []string {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	var names []string
	for _, u := range p.expect {
		names = append(names, u.name())
	}
	return names
}

// sameFields reports how go-amqp's performative differs from the one the
// flight carried.
func sameFields(want, got unit) error {
	if !reflect.DeepEqual(want.fields, got.fields) {
		return fmt.Errorf("pipelined AMQP start: go-amqp's %s differs from the one sent early: %v, sent %v (a go-amqp version the pipelined start does not know?)",
			want.name(), got.fields, want.fields)
	}
	return nil
}

// parseUnit decodes one protocol header or one whole frame.
func parseUnit(b []byte) (unit, error) {
	if len(b) == 8 && bytes.HasPrefix(b, []byte("AMQP")) {
		return unit{raw: b, header: true}, nil
	}
	if len(b) < 8 {
		return unit{}, errShort
	}
	size := int(binary.BigEndian.Uint32(b))
	doff := int(b[4]) * 4
	if size != len(b) || doff < 8 || doff > size {
		return unit{}, fmt.Errorf("frame size %d, data offset %d", size, doff)
	}
	u := unit{raw: b, typ: b[5], channel: binary.BigEndian.Uint16(b[6:])}
	if doff == size {
		return u, nil // empty frame
	}
	code, fields, _, err := performative(b[doff:])
	if err != nil {
		return unit{}, err
	}
	u.code, u.fields = code, fields
	return u, nil
}
