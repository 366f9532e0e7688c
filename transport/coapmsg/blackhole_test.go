package coapmsg

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/plgd-dev/go-coap/v3/message"
)

// TestRetransmissionOverUDPBlackHole sends a CON message over a real UDP
// socket on loopback to a socket that never answers, records the instants
// at which the datagrams arrive and checks them against RFC 7252: the first
// timeout T0 lies in [ACK_TIMEOUT, ACK_TIMEOUT*ACK_RANDOM_FACTOR], every
// later one doubles, and the exchange fails with ErrTimeout after
// MAX_RETRANSMIT retransmissions. Timers never fire early; a loaded machine
// can fire them late (up to 400 ms tolerated each) and stamp an arrival
// late, which shortens the next gap (50 ms tolerated).
func TestRetransmissionOverUDPBlackHole(t *testing.T) {
	hole, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	arrivals := make(chan time.Time, 16)
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := hole.ReadFrom(buf); err != nil {
				close(arrivals)
				return
			}
			arrivals <- time.Now()
		}
	}()
	sock, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	p := Params{AckTimeout: 200 * time.Millisecond, AckRandomFactor: 1.5, MaxRetransmit: 3}
	e, err := New(sock, Options{Params: p})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	done := make(chan error, 1)
	start := time.Now()
	m := &message.Message{Type: message.Confirmable, Code: 3 /* PUT */, Token: NewToken(), Payload: []byte("x")}
	if err := e.Send(hole.LocalAddr(), m, func(_ *message.Message, err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	var outcome error
	select {
	case outcome = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("no outcome after 30 s")
	}
	failedAfter := time.Since(start)
	hole.Close()
	var at []time.Duration
	for a := range arrivals {
		at = append(at, a.Sub(start))
	}
	t.Logf("arrivals %v, gave up after %s", at, failedAfter)
	if !errors.Is(outcome, ErrTimeout) {
		t.Fatalf("want ErrTimeout, got %v", outcome)
	}
	if len(at) != 1+p.MaxRetransmit {
		t.Fatalf("%d datagrams arrived, want %d", len(at), 1+p.MaxRetransmit)
	}
	const late = 400 * time.Millisecond
	// Arrivals are stamped by a reader goroutine: one scheduled late
	// shortens the gap after it, so a gap may look a little short too.
	const early = 50 * time.Millisecond
	// Gaps between transmissions: T0, 2T0, 4T0, ... and the final wait 2^n T0.
	gaps := []time.Duration{}
	for i := 1; i < len(at); i++ {
		gaps = append(gaps, at[i]-at[i-1])
	}
	gaps = append(gaps, failedAfter-at[len(at)-1])
	lo, hi := p.AckTimeout, time.Duration(float64(p.AckTimeout)*p.AckRandomFactor)
	for k, g := range gaps {
		f := time.Duration(1 << k)
		// A datagram's arrival may precede its timer by the loopback
		// delivery jitter only: allow 5 ms.
		if g < f*lo-early || g > f*hi+late {
			t.Errorf("gap %d is %s, want within [%s, %s] (+ lateness)", k, g, f*lo, f*hi)
		}
	}
	// Doubling: each gap is twice the previous one, up to timer lateness.
	for k := 1; k < len(gaps); k++ {
		if d := gaps[k] - 2*gaps[k-1]; d < -2*late || d > late {
			t.Errorf("gap %d (%s) is not twice gap %d (%s)", k, gaps[k], k-1, gaps[k-1])
		}
	}
}
