package coapmsg

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"
)

var peerA = &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5683}

func newTestEndpoint(t *testing.T, p Params, u float64, h Handler) (*Endpoint, *fakeClock, *fakeConn) {
	t.Helper()
	clk := newFakeClock()
	conn := newFakeConn(clk)
	e, err := New(conn, Options{Params: p, Clock: clk, Rand: func() float64 { return u }, Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e, clk, conn
}

func put(t *testing.T) *message.Message {
	return &message.Message{Type: message.Confirmable, Code: codes.PUT, Token: NewToken(), Payload: []byte("v")}
}

type result struct {
	ack *message.Message
	err error
	at  time.Time
}

func sendCON(t *testing.T, e *Endpoint, clk *fakeClock, m *message.Message) chan result {
	t.Helper()
	ch := make(chan result, 2)
	if err := e.Send(peerA, m, func(ack *message.Message, err error) { ch <- result{ack, err, clk.Now()} }); err != nil {
		t.Fatal(err)
	}
	return ch
}

// offsets returns the send instants relative to the first one.
func offsets(ws []sent) []time.Duration {
	var out []time.Duration
	for _, w := range ws {
		out = append(out, w.at.Sub(ws[0].at))
	}
	return out
}

func TestRetransmissionScheduleRFC7252(t *testing.T) {
	for _, tc := range []struct {
		name   string
		p      Params
		u      float64
		want   []time.Duration // transmissions
		giveUp time.Duration
	}{
		// Defaults, T0 = 2 s (u=0): 0, T0, 3T0, 7T0, 15T0; give up at 31T0.
		{"defaults-min", Params{}, 0, []time.Duration{0, 2e9, 6e9, 14e9, 30e9}, 62 * time.Second},
		// T0 = 2.5 s (u=0.5).
		{"defaults-mid", Params{}, 0.5, []time.Duration{0, 2500e6, 7500e6, 17500e6, 37500e6}, 77500 * time.Millisecond},
		// T0 = 2.999999 s (u -> 1): the upper end of [ACK_TIMEOUT, 1.5 ACK_TIMEOUT].
		{"defaults-max", Params{}, 0.999999, []time.Duration{0, 2999999e3, 8999997e3, 20999993e3, 44999985e3}, 92999969 * time.Microsecond},
		// Every parameter is configurable.
		{"custom", Params{AckTimeout: 100 * time.Millisecond, AckRandomFactor: 1, MaxRetransmit: 2}, 0.7,
			[]time.Duration{0, 100e6, 300e6}, 700 * time.Millisecond},
		{"no-retransmit", Params{AckTimeout: time.Second, MaxRetransmit: -1}, 0, []time.Duration{0}, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, clk, conn := newTestEndpoint(t, tc.p, tc.u, nil)
			ch := sendCON(t, e, clk, put(t))
			start := clk.Now()
			clk.Advance(tc.giveUp - time.Millisecond)
			select {
			case r := <-ch:
				t.Fatalf("gave up too early, at %s: %v", r.at.Sub(start), r.err)
			default:
			}
			clk.Advance(time.Millisecond)
			var r result
			select {
			case r = <-ch:
			case <-time.After(10 * time.Second):
				t.Fatalf("no outcome at %s; transmissions at %v", tc.giveUp, offsets(conn.sent()))
			}
			if !errors.Is(r.err, ErrTimeout) {
				t.Fatalf("want ErrTimeout, got %v", r.err)
			}
			if got := r.at.Sub(start); got != tc.giveUp {
				t.Errorf("gave up after %s, want %s", got, tc.giveUp)
			}
			got := offsets(conn.sent())
			if len(got) != len(tc.want) {
				t.Fatalf("transmissions at %v, want %v", got, tc.want)
			}
			for i := range got {
				if d := got[i] - tc.want[i]; d < -time.Microsecond || d > time.Microsecond {
					t.Fatalf("transmissions at %v, want %v", got, tc.want)
				}
			}
			ws := conn.sent()
			for _, w := range ws[1:] {
				if string(w.data) != string(ws[0].data) {
					t.Fatal("a retransmission differs from the original (must keep message ID and content)")
				}
			}
			if s := e.Stats(); s.Timeouts != 1 || s.Retransmissions != int64(len(tc.want)-1) {
				t.Errorf("stats %+v", s)
			}
			clk.Advance(time.Hour)
			if n := len(conn.sent()); n != len(tc.want) {
				t.Errorf("%d transmissions after giving up, want %d", n, len(tc.want))
			}
		})
	}
}

func decode(t *testing.T, b []byte) *message.Message {
	t.Helper()
	m, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func ackFor(t *testing.T, data []byte, typ message.Type, code codes.Code) []byte {
	m := decode(t, data)
	b, err := encode(&message.Message{Type: typ, Code: code, MessageID: m.MessageID, Token: m.Token})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAckStopsRetransmission(t *testing.T) {
	e, clk, conn := newTestEndpoint(t, Params{}, 0, nil)
	ch := sendCON(t, e, clk, put(t))
	clk.Advance(2 * time.Second) // first retransmission
	conn.inject(peerA, ackFor(t, conn.sent()[0].data, message.Acknowledgement, codes.Changed))
	r := <-ch
	if r.err != nil || r.ack == nil || r.ack.Code != codes.Changed {
		t.Fatalf("want the piggy-backed 2.04, got %+v", r)
	}
	clk.Advance(time.Minute)
	if n := len(conn.sent()); n != 2 {
		t.Fatalf("%d transmissions, want 2 (original + one retransmission)", n)
	}
}

func TestResetFailsExchange(t *testing.T) {
	e, clk, conn := newTestEndpoint(t, Params{}, 0, nil)
	ch := sendCON(t, e, clk, put(t))
	conn.inject(peerA, ackFor(t, conn.sent()[0].data, message.Reset, codes.Empty))
	if r := <-ch; !errors.Is(r.err, ErrReset) {
		t.Fatalf("want ErrReset, got %v", r.err)
	}
}

func TestNStart(t *testing.T) {
	for _, nstart := range []int{1, 2} {
		e, clk, conn := newTestEndpoint(t, Params{NStart: nstart}, 0, nil)
		ch1 := sendCON(t, e, clk, put(t))
		ch2 := sendCON(t, e, clk, put(t))
		if n := len(conn.sent()); n != nstart {
			t.Fatalf("NSTART %d: %d messages outstanding", nstart, n)
		}
		if nstart == 1 {
			conn.inject(peerA, ackFor(t, conn.sent()[0].data, message.Acknowledgement, codes.Empty))
			<-ch1
			waitFor(t, func() bool { return len(conn.sent()) == 2 })
			clk.Advance(62 * time.Second)
			if r := <-ch2; !errors.Is(r.err, ErrTimeout) {
				t.Fatal(r.err)
			}
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestServerDeduplicatesAndAnswers(t *testing.T) {
	calls := make(chan string, 10)
	h := func(peer net.Addr, req *message.Message) *message.Message {
		calls <- string(req.Payload)
		return &message.Message{Code: codes.Changed}
	}
	e, clk, conn := newTestEndpoint(t, Params{}, 0, h)
	req, _ := encode(&message.Message{Type: message.Confirmable, Code: codes.PUT, MessageID: 7, Token: []byte{1, 2}, Payload: []byte("a")})
	conn.inject(peerA, req)
	waitFor(t, func() bool { return len(conn.sent()) == 1 })
	conn.inject(peerA, req) // duplicate: same ACK again, handler not called
	waitFor(t, func() bool { return len(conn.sent()) == 2 })
	ws := conn.sent()
	if string(ws[0].data) != string(ws[1].data) {
		t.Fatal("duplicate CON not answered with the same ACK")
	}
	ack := decode(t, ws[0].data)
	if ack.Type != message.Acknowledgement || ack.MessageID != 7 || ack.Code != codes.Changed || string(ack.Token) != "\x01\x02" {
		t.Fatalf("bad piggy-backed response %v", ack)
	}
	if len(calls) != 1 || e.Stats().Duplicates != 1 {
		t.Fatalf("handler calls %d, duplicates %d", len(calls), e.Stats().Duplicates)
	}
	// After EXCHANGE_LIFETIME the message ID is forgotten.
	clk.Advance(e.Params().ExchangeLifetime + e.Params().ExchangeLifetime/2)
	conn.inject(peerA, req)
	waitFor(t, func() bool { return len(calls) == 2 })
}

func TestRejects(t *testing.T) {
	e, _, conn := newTestEndpoint(t, Params{}, 0, func(net.Addr, *message.Message) *message.Message {
		return &message.Message{Code: codes.Content}
	})
	// Unknown critical option (number 9 is OSCORE, not supported) -> 4.02.
	req, _ := encode(&message.Message{Type: message.Confirmable, Code: codes.GET, MessageID: 1,
		Options: message.Options{{ID: 9, Value: []byte{1}}}})
	conn.inject(peerA, req)
	waitFor(t, func() bool { return len(conn.sent()) == 1 })
	if m := decode(t, conn.sent()[0].data); m.Code != codes.BadOption || m.Type != message.Acknowledgement {
		t.Fatalf("want 4.02 ACK, got %v", m)
	}
	// A truncated confirmable message -> RST with its message ID.
	conn.inject(peerA, []byte{0x40 | 0x08, 0x01, 0x00, 0x02, 0xAA}) // TKL 8 but 1 token byte
	waitFor(t, func() bool { return len(conn.sent()) == 2 })
	if m := decode(t, conn.sent()[1].data); m.Type != message.Reset || m.MessageID != 2 {
		t.Fatalf("want RST for mid 2, got %v", m)
	}
	// Garbage: ignored, counted.
	conn.inject(peerA, []byte{0xff})
	// CoAP ping -> RST.
	ping, _ := encode(&message.Message{Type: message.Confirmable, Code: codes.Empty, MessageID: 3})
	conn.inject(peerA, ping)
	waitFor(t, func() bool { return len(conn.sent()) == 3 })
	if m := decode(t, conn.sent()[2].data); m.Type != message.Reset || m.MessageID != 3 {
		t.Fatalf("want RST for the ping, got %v", m)
	}
	if s := e.Stats(); s.BadDatagrams != 2 || s.BadOptions != 1 || s.ResetsSent != 2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestCoCoA(t *testing.T) {
	e, clk, conn := newTestEndpoint(t, Params{CoCoA: true}, 0, nil)
	// Strong sample: acknowledged 100 ms after the first transmission.
	ch := sendCON(t, e, clk, put(t))
	clk.Advance(100 * time.Millisecond)
	conn.inject(peerA, ackFor(t, conn.sent()[0].data, message.Acknowledgement, codes.Empty))
	<-ch
	// RTO_strong = 100ms + 4*50ms = 300ms; RTO = (2s + 300ms)/2 = 1.15s.
	ch = sendCON(t, e, clk, put(t))
	clk.Advance(10 * time.Minute)
	r := <-ch
	if !errors.Is(r.err, ErrTimeout) {
		t.Fatal(r.err)
	}
	got := offsets(conn.sent()[1:])
	// Variable back-off: 1.15 s -> x2 (1-3 s) = 2.3 -> x2 = 4.6 -> x1.5 = 6.9 -> x1.5 = 10.35.
	want := []time.Duration{0, 1150e6, 3450e6, 8050e6, 14950e6}
	if len(got) != len(want) {
		t.Fatalf("got %v want %v", got, want)
	}
	for i := range got {
		if d := got[i] - want[i]; d < -time.Millisecond || d > time.Millisecond {
			t.Fatalf("got %v want %v", got, want)
		}
	}
}

func TestParamsDerived(t *testing.T) {
	p := Params{}.WithDefaults()
	if p.MaxTransmitSpan() != 45*time.Second || p.MaxTransmitWait() != 93*time.Second ||
		p.ExchangeLifetime != 247*time.Second || p.NonLifetime != 145*time.Second {
		t.Fatalf("derived parameters %+v span %s wait %s", p, p.MaxTransmitSpan(), p.MaxTransmitWait())
	}
	if err := (Params{AckRandomFactor: 0.5, NStart: -1}).Validate(); err == nil {
		t.Fatal("bad parameters accepted")
	}
}

func TestDedupTableBounded(t *testing.T) {
	clk := newFakeClock()
	conn := newFakeConn(clk)
	calls := make(chan struct{}, 10)
	e, err := New(conn, Options{Clock: clk, MaxDedup: 2, Handler: func(net.Addr, *message.Message) *message.Message {
		calls <- struct{}{}
		return &message.Message{Code: codes.Changed}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for mid := int32(1); mid <= 3; mid++ {
		b, _ := encode(&message.Message{Type: message.Confirmable, Code: codes.PUT, MessageID: mid})
		conn.inject(peerA, b)
	}
	waitFor(t, func() bool { return len(conn.sent()) == 3 })
	if s := e.Stats(); s.DedupFull != 1 || len(calls) != 3 {
		t.Fatalf("dedup full %d, handler calls %d; want 1 and 3", s.DedupFull, len(calls))
	}
}
