package amqp

import (
	"bytes"
	"io"
	"reflect"
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

// TestFlight: every frame of the first flight stays within the 512 bytes
// allowed before the peer's open, and a large early message is split
// into transfer frames whose payloads add up to the message.
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
	}
	want := []string{"protocol header 3", "sasl-init", "protocol header 0", "open", "begin", "attach", "transfer"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("units %v, want %v", names, want)
	}
	tr := units[len(units)-1]
	msg, _ := es.message()
	var body []byte
	frames := 0
	for b := tr.raw; len(b) > 0; frames++ {
		size := int(b[0])<<24 | int(b[1])<<16 | int(b[2])<<8 | int(b[3])
		if size > minMaxFrameSize {
			t.Fatalf("transfer frame %d: %d bytes", frames, size)
		}
		_, f, payload, err := performative(b[8:size])
		if err != nil {
			t.Fatal(err)
		}
		if got, last := more(f), size == len(b); got == last {
			t.Fatalf("frame %d: more %v at the end %v", frames, got, last)
		}
		body = append(body, payload...)
		b = b[size:]
	}
	if frames != tr.transfer || frames < 5 || !bytes.Equal(body, msg) {
		t.Fatalf("%d frames (unit says %d), payload %d bytes of %d", frames, tr.transfer, len(body), len(msg))
	}
	for _, u := range units[:len(units)-1] {
		if len(u.raw) > minMaxFrameSize {
			t.Errorf("%s: %d bytes", u.name(), len(u.raw))
		}
	}
}

// stepConn returns a byte stream in reads of at most step bytes.
type stepConn struct {
	transport.Conn
	data []byte
	step int
}

func (c *stepConn) Read(b []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(b, c.data[:min(c.step, len(c.data))])
	c.data = c.data[n:]
	return n, nil
}

// TestPipeConnRead: whatever the broker's stream looks like in pieces,
// go-amqp reads it whole and in order through pipeConn, and the
// disposition of delivery 0 from the receiver is reported once; an attach
// reply waits until go-amqp wrote its attach.
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
	other, _ := frame(frameAMQP, 0, described{code: descDisposition, value: list{false, uint32(0)}}, nil) // role sender: not ours
	disp, _ := frame(frameAMQP, 0, described{code: descDisposition, value: list{true, uint32(0), nil, true,
		described{code: descAccepted, value: list{}}}}, nil)
	for _, f := range [][]byte{open, {0, 0, 0, 8, 2, 0, 0, 0}, begin, attach, other, disp} {
		stream = append(stream, f...)
	}
	for step := 1; step <= len(stream); step += 7 {
		var got []any
		p := newPipeConn(&stepConn{data: stream, step: step}, units, false, func(s any) { got = append(got, s) })
		for _, u := range units[:3] { // header, open, begin written by go-amqp
			if n, err := p.Write(u.raw); err != nil || n != len(u.raw) {
				t.Fatalf("swallow %s: %d, %v", u.name(), n, err)
			}
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
		go func() { _, _ = p.Write(units[3].raw) }() // go-amqp's attach
		readUntil(len(stream))
		if !bytes.Equal(read, stream) || len(got) != 1 || earlyOutcome(got[0]) != nil {
			t.Fatalf("step %d: stream intact %v, dispositions %v", step, bytes.Equal(read, stream), got)
		}
	}
	rej := described{code: descRejected, value: list{described{code: descError, value: list{symbol("amqp:not-allowed"), "no"}}}}
	if err := earlyOutcome(rej); err == nil || err.Error() != "broker rejected the message: amqp:not-allowed: no" {
		t.Fatalf("rejected: %v", err)
	}
}
