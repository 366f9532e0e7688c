package amqp

import (
	"bytes"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/transport"
)

func TestCodecRoundTrip(t *testing.T) {
	long := string(bytes.Repeat([]byte("x"), 300))
	in := list{nil, true, false, uint8(7), uint16(65535), uint32(0), uint32(200), uint32(70000),
		uint64(0), uint64(9), uint64(1 << 40), "", long, symbol("ANONYMOUS"), []byte{1, 2},
		list{}, described{code: descTarget, value: list{"addr"}}}
	var e encoder
	if err := e.value(in); err != nil {
		t.Fatal(err)
	}
	out, n, err := decode(e.b)
	if err != nil || n != len(e.b) {
		t.Fatalf("decode: %v, %d of %d bytes", err, n, len(e.b))
	}
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip:\n got %#v\nwant %#v", out, in)
	}
	for i := range len(e.b) {
		if _, _, err := decode(e.b[:i]); err == nil {
			t.Fatalf("decode of %d of %d bytes: no error", i, len(e.b))
		}
	}
}

// TestFlight: the first flight is the start up to the attach, without a
// transfer (a transfer waits for the broker's begin and flow), and every
// frame stays within the 512 bytes allowed before the peer's open; an
// attach that would not is refused.
func TestFlight(t *testing.T) {
	es := &earlyStart{sasl: "PLAIN", username: "u", password: "p", containerID: "c", hostname: "h",
		idleTimeout: time.Minute, linkName: "l", address: "a", tag: make([]byte, 8), payload: bytes.Repeat([]byte{7}, 2000)}
	units, err := es.flight()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range units {
		names = append(names, u.name())
		if len(u.raw) > minMaxFrameSize {
			t.Errorf("%s: %d bytes", u.name(), len(u.raw))
		}
	}
	want := []string{"protocol header 3", "sasl-init", "protocol header 0", "open", "begin", "attach"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("units %v, want %v", names, want)
	}
	es.sasl = ""
	if units, err := es.flight(); err != nil || len(units) != 4 || !units[0].header || units[0].raw[4] != 0 {
		t.Fatalf("without SASL: %d units, %v", len(units), err)
	}
	es.address = strings.Repeat("a", 600)
	if _, err := es.flight(); err == nil || !strings.Contains(err.Error(), "attach") {
		t.Fatalf("an attach of more than 512 bytes: %v", err)
	}
}

// stepConn returns a byte stream in reads of at most step bytes and
// collects what is written.
type stepConn struct {
	transport.Conn
	data []byte
	step int
	out  []byte
}

func (c *stepConn) Read(b []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(b, c.data[:min(c.step, len(c.data))])
	c.data = c.data[n:]
	return n, nil
}

func (c *stepConn) Write(b []byte) (int, error) {
	c.out = append(c.out, b...)
	return len(b), nil
}

// TestPipeConnRead: whatever the broker's stream looks like in pieces,
// go-amqp reads it whole and in order through pipeConn; an attach reply
// (and the flow behind it) waits until go-amqp wrote its attach. The
// first transfer go-amqp writes after the flight goes through and is
// reported once; a transfer before the flight is complete is refused.
func TestPipeConnRead(t *testing.T) {
	es := &earlyStart{containerID: "c", linkName: "l", address: "a", tag: make([]byte, 8), payload: []byte("x")}
	units, err := es.flight()
	if err != nil {
		t.Fatal(err)
	}
	var stream []byte
	stream = append(stream, protoHeader(0)...)
	open, _ := frame(frameAMQP, 0, described{code: descOpen, value: list{"broker"}}, nil)
	begin, _ := frame(frameAMQP, 0, described{code: descBegin, value: list{uint16(0), uint32(1), uint32(10), uint32(10)}}, nil)
	attach, _ := frame(frameAMQP, 0, described{code: descAttach, value: list{"l", uint32(0), true}}, nil)
	flow, _ := frame(frameAMQP, 0, described{code: descFlow, value: list{uint32(0), uint32(10), uint32(0), uint32(10), uint32(0), uint32(0), uint32(100)}}, nil)
	disp, _ := frame(frameAMQP, 0, described{code: descDisposition, value: list{true, uint32(0), nil, true,
		described{code: descAccepted, value: list{}}}}, nil)
	for _, f := range [][]byte{open, {0, 0, 0, 8, 2, 0, 0, 0}, begin, attach, flow, disp} {
		stream = append(stream, f...)
	}
	transfer, _ := frame(frameAMQP, 0, described{code: descTransfer, value: list{uint32(0), uint32(0), []byte{0}, uint32(0), false, false}}, []byte("msg"))
	for step := 1; step <= len(stream); step += 7 {
		sc := &stepConn{data: stream, step: step}
		p := newPipeConn(sc, units)
		var transfers []time.Time
		p.onTransfer = func(at time.Time) { transfers = append(transfers, at) }
		for _, u := range units[:3] { // header, open, begin written by go-amqp
			if n, err := p.Write(u.raw); err != nil || n != len(u.raw) {
				t.Fatalf("swallow %s: %d, %v", u.name(), n, err)
			}
		}
		if _, err := p.Write(transfer); err == nil || !strings.Contains(err.Error(), "before the flight's attach") {
			t.Fatalf("a transfer before go-amqp's attach: %v", err)
		}
		var read []byte
		buf := make([]byte, 1000)
		readUntil := func(n int) {
			for len(read) < n {
				m, err := p.Read(buf)
				if err != nil {
					t.Fatalf("step %d: read after %d bytes: %v", step, len(read), err)
				}
				read = append(read, buf[:m]...)
			}
		}
		upToAttach := len(protoHeader(0)) + len(open) + 8 + len(begin)
		readUntil(upToAttach)
		if len(read) != upToAttach {
			t.Fatalf("step %d: read %d bytes before go-amqp's attach, want %d", step, len(read), upToAttach)
		}
		done := make(chan error, 1)
		go func() { _, err := p.Write(units[3].raw); done <- err }() // go-amqp's attach
		readUntil(len(stream))
		if err := <-done; err != nil || !bytes.Equal(read, stream) {
			t.Fatalf("step %d: attach %v, stream intact %v", step, err, bytes.Equal(read, stream))
		}
		if len(p.pending()) != 0 || len(transfers) != 0 || len(sc.out) != 0 {
			t.Fatalf("step %d: pending %v, transfers %v, written %d bytes", step, p.pending(), transfers, len(sc.out))
		}
		for range 2 {
			if n, err := p.Write(transfer); err != nil || n != len(transfer) {
				t.Fatalf("transfer after the flight: %d, %v", n, err)
			}
		}
		if len(transfers) != 1 || !bytes.Equal(sc.out, append(append([]byte(nil), transfer...), transfer...)) {
			t.Fatalf("step %d: first transfer reported %d times, written %d bytes", step, len(transfers), len(sc.out))
		}
	}
}

// TestIsTransfer: the first transfer after the flight is recognised in
// go-amqp's framing (one frame per write) and nothing else is.
func TestIsTransfer(t *testing.T) {
	transfer, _ := frame(frameAMQP, 0, described{code: descTransfer, value: list{uint32(0)}}, []byte("msg"))
	flow, _ := frame(frameAMQP, 0, described{code: descFlow, value: list{uint32(0)}}, nil)
	sasl, _ := frame(frameSASL, 0, described{code: descTransfer, value: list{}}, nil)
	for b, want := range map[string]bool{string(transfer): true, string(flow): false, string(sasl): false,
		string(protoHeader(0)): false, string([]byte{0, 0, 0, 8, 2, 0, 0, 0}): false, "": false} {
		if got := isTransfer([]byte(b)); got != want {
			t.Errorf("isTransfer(% x) = %v", b, got)
		}
	}
}
