package amqp

// Pipelined connection start (Options.Early): the client writes the whole
// start of the connection at once, without waiting for any reply: the
// protocol headers (SASL and AMQP), sasl-init, open, begin, attach (one
// sender link) and the transfer of the early message. AMQP 1.0 allows it
// (part 2 section 2.4.1: a client may pipeline open and what follows; part
// 5 section 5.3.1 for SASL); over QUIC with a ticket the whole flight
// leaves as 0-RTT data.
//
// go-amqp then runs its usual start on the same connection, in turn: its
// writes of the frames already sent are swallowed by pipeConn (after a
// check that they say what ours said, so the two views of the connection
// agree: same container, link name, handle, delivery id and tag), and it
// reads the broker's real replies. Its own transfer of the early message
// is swallowed too and keeps its delivery counters in step; the broker's
// disposition of the early transfer is read by pipeConn on the way in and
// completes the early Receipt.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"reflect"
	"sync"
	"time"

	"github.com/iotq/iotq/transport"
)

// minMaxFrameSize is the largest frame a peer may send before it has the
// other side's open (AMQP 1.0 part 2 section 2.7.1): every pipelined
// frame stays within it, so the early message is split into transfer
// frames of at most this size.
const minMaxFrameSize = 512

// maxFrameSize is the max-frame-size this client announces (go-amqp's
// default, set explicitly so that both encoders agree).
const maxFrameSize = 65536

// maxEarlyPayload bounds the early message's body: the flight then stays
// within the transport's 0-RTT budget (8 KiB).
const maxEarlyPayload = 6 << 10

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
	raw      []byte
	header   bool
	channel  uint16
	typ      byte   // frame type
	code     uint64 // performative
	fields   list
	transfer int // transfer frames of the early message in raw (code transfer)
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

// message encodes the early message as go-amqp encodes
// Message{Data: [][]byte{payload}, Properties: {To: address}}: a properties
// section with "to" and one data section.
func (e *earlyStart) message() ([]byte, error) {
	enc := encoder{}
	if err := enc.value(described{code: descProperties, value: list{null, null, e.address}}); err != nil {
		return nil, err
	}
	if err := enc.value(described{code: descData, value: e.payload}); err != nil {
		return nil, err
	}
	return enc.b, nil
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
	// The transfer: split into frames of at most minMaxFrameSize bytes.
	msg, err := e.message()
	if err != nil {
		return nil, err
	}
	first := list{uint32(0), uint32(0), e.tag, uint32(0), e.settled, true}
	var raw []byte
	frames := 0
	for frames == 0 || len(msg) > 0 {
		fields := list{uint32(0), null, null, null, e.settled, true}
		if frames == 0 {
			fields = append(list(nil), first...)
		}
		hdr, err := frame(frameAMQP, 0, described{code: descTransfer, value: fields}, nil)
		if err != nil {
			return nil, err
		}
		n := min(minMaxFrameSize-len(hdr), len(msg))
		fields[5] = n < len(msg) // more: the same size encoded
		f, err := frame(frameAMQP, 0, described{code: descTransfer, value: fields}, msg[:n])
		if err != nil {
			return nil, err
		}
		raw = append(raw, f...)
		msg = msg[n:]
		frames++
	}
	units = append(units, unit{raw: raw, typ: frameAMQP, code: descTransfer, fields: trimNulls(first), transfer: frames})
	return units, nil
}

// pipeConn is the transport conn as go-amqp sees it during a pipelined
// start. Write side: it swallows go-amqp's writes of what the flight
// already carried. Read side: it hands go-amqp the broker's frames whole,
// and holds back a begin or attach reply until go-amqp has "sent" the
// begin or attach it answers (go-amqp drops replies it does not expect
// yet); it watches for the disposition of the early transfer (delivery
// id 0). Once go-amqp has written the whole flight and the disposition
// was seen, both sides pass straight through.
type pipeConn struct {
	transport.Conn

	wmu       sync.Mutex // guards the write side
	expect    []unit     // units of the flight go-amqp has not written yet
	inTrans   bool       // swallowing go-amqp's transfer frames (more = true seen)
	swallowed func(name string)

	rmu      sync.Mutex // guards the read side
	cond     *sync.Cond // on rmu: go-amqp wrote a unit, or Close
	sent     map[uint64]bool
	flushed  bool   // go-amqp has written the whole flight
	watching bool   // the early disposition is still to come
	closed   bool   // Close was called
	in       []byte // read from the conn, not yet handed on; starts at a unit
	ready    int    // bytes at the start of in that go-amqp may have
	rerr     error  // the conn's read error, after in
	onState  func(state any)
}

// newPipeConn returns the conn for go-amqp; the flight must have been
// written to c already. onDisposition receives the state of the early
// transfer's disposition (nil when it has none); unused when settled.
func newPipeConn(c transport.Conn, units []unit, settled bool, onDisposition func(state any)) *pipeConn {
	p := &pipeConn{Conn: c, expect: units, sent: map[uint64]bool{}, watching: !settled, onState: onDisposition}
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
		case p.flushed && !p.watching:
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
// or attach only once go-amqp has written its own. It also watches for
// the early disposition. rmu held.
func (p *pipeConn) mayPass(u []byte) bool {
	if len(u) == 8 || u[5] != frameAMQP || binary.BigEndian.Uint16(u[6:]) != 0 {
		return true
	}
	doff := int(u[4]) * 4
	if doff < 8 || doff >= len(u) {
		return true
	}
	code, f, _, err := performative(u[doff:])
	if err != nil {
		return true // go-amqp will say what is wrong
	}
	switch code {
	case descBegin, descAttach:
		return p.flushed || p.sent[code]
	case descDisposition:
		if p.watching && isEarlyDisposition(f) {
			p.watching = false
			var state any
			if len(f) > 4 {
				state = f[4]
			}
			if p.onState != nil {
				p.onState(state)
			}
		}
	}
	return true
}

// isEarlyDisposition: from the receiver (role true), first = delivery 0,
// the early transfer (the first delivery of the session).
func isEarlyDisposition(f list) bool {
	if len(f) < 2 {
		return false
	}
	role, _ := f[0].(bool)
	first, ok := f[1].(uint32)
	return role && ok && first == 0
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
		return p.Conn.Write(b)
	}
	got, err := parseUnit(b)
	if err != nil {
		return 0, fmt.Errorf("pipelined AMQP start: go-amqp wrote %d bytes that are not one frame: %w", len(b), err)
	}
	want := p.expect[0]
	if p.inTrans {
		if got.header || got.code != descTransfer || got.channel != 0 {
			return 0, fmt.Errorf("pipelined AMQP start: go-amqp wrote %s in the middle of the early transfer", got.name())
		}
		if !more(got.fields) {
			p.inTrans = false
			p.done(want)
		}
		return len(b), nil
	}
	switch {
	case want.header != got.header:
		return p.Conn.Write(b) // e.g. an empty frame (keep-alive): not ours
	case want.header:
		if !bytes.Equal(want.raw, got.raw) {
			return 0, fmt.Errorf("pipelined AMQP start: go-amqp wrote %s, the flight had %s", got.name(), want.name())
		}
		p.done(want)
		return len(b), nil
	case got.typ != want.typ || got.code != want.code || got.channel != 0:
		return p.Conn.Write(b)
	}
	if err := sameFields(want, got); err != nil {
		return 0, err
	}
	if want.code == descTransfer && more(got.fields) {
		p.inTrans = true
		return len(b), nil
	}
	p.done(want)
	return len(b), nil
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

func more(fields list) bool {
	return len(fields) > 5 && fields[5] == true
}

// sameFields reports how go-amqp's performative differs from the one the
// flight carried. For the transfer, settled and more are not compared
// (go-amqp's copy is sent pre-settled, in its own frame size).
func sameFields(want, got unit) error {
	w, g := want.fields, got.fields
	if want.code == descTransfer {
		w, g = transferKey(w), transferKey(g)
	}
	if !reflect.DeepEqual(w, g) {
		return fmt.Errorf("pipelined AMQP start: go-amqp's %s differs from the one sent early: %v, sent %v (a go-amqp version the pipelined start does not know?)",
			want.name(), g, w)
	}
	return nil
}

func transferKey(f list) list {
	k := append(list(nil), f...)
	for len(k) < 6 {
		k = append(k, nil)
	}
	k[4], k[5] = nil, nil
	return trimNulls(k)
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

// earlyOutcome turns the disposition state of the early transfer into
// the receipt's error, as outcome does for go-amqp's states.
func earlyOutcome(state any) error {
	d, ok := state.(described)
	if !ok {
		return errors.New("broker settled the early message without an outcome")
	}
	switch d.code {
	case descAccepted:
		return nil
	case descRejected:
		if l, ok := d.value.(list); ok && len(l) > 0 {
			if e, ok := l[0].(described); ok && e.code == descError {
				if el, ok := e.value.(list); ok && len(el) > 0 {
					desc := ""
					if len(el) > 1 {
						desc, _ = el[1].(string)
					}
					return fmt.Errorf("broker rejected the message: %v: %s", el[0], desc)
				}
			}
		}
		return errors.New("broker rejected the message")
	case descReleased:
		return errors.New("broker released the message (not delivered; send again)")
	case descModified:
		return errors.New("broker modified the message (not delivered; send again)")
	}
	return fmt.Errorf("unexpected delivery state %#x", d.code)
}
