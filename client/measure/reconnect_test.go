package measure_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/client/measure"
	"github.com/iotq/iotq/internal/payload"
	"github.com/iotq/iotq/internal/testutil"
)

// cutProxy forwards TCP connections on loopback to a broker. hold stops
// forwarding what the broker sends (its PUBACKs pile up unread, as on a
// path that died); cut ends every connection through it, as the reset a
// client gets after its NAT rebound.
type cutProxy struct {
	ln      net.Listener
	target  string
	holding atomic.Bool
	mu      sync.Mutex
	conns   []net.Conn
	wg      sync.WaitGroup
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, b)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); _, _ = io.Copy(b, c); b.Close() }()
		go func() {
			defer p.wg.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := b.Read(buf)
				if n > 0 && !p.holding.Load() {
					if _, werr := c.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			c.Close()
		}()
	}
}

// cut stops holding and closes every connection through the proxy (new
// ones work: the client dials again at once).
func (p *cutProxy) cut() {
	p.holding.Store(false)
	p.mu.Lock()
	cs := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range cs {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, not a FIN
		}
		c.Close()
	}
}

// TestPublisherReconnect: a paced QoS 1 run whose connection dies after
// the broker stopped being heard (its PUBACKs held back, then a reset)
// reconnects with the same client id, publishes the unacknowledged
// messages again and continues the sequence: every message is
// acknowledged and reaches a subscriber, the ones resent that the broker
// had already taken arrive twice, and the summary counts one
// reconnection.
func TestPublisherReconnect(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{})
	url := brokertest.Endpoint(t, srv, "mqtt")
	px := newCutProxy(t, strings.TrimPrefix(url, "mqtt://"))
	pxURL := "mqtt://" + px.ln.Addr().String()

	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	var mu sync.Mutex
	got := map[uint32]int{}
	sub, err := client.Dial(ctx, url, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := sub.Subscribe(ctx, "m/r", client.SubscribeOptions{QoS: 1}, func(m client.Message) {
		h, err := payload.Decode(m.Payload)
		if err != nil {
			t.Errorf("payload: %v", err)
			return
		}
		mu.Lock()
		got[h.Seq]++
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}

	opts := client.Options{ClientID: "reconnecting-pub", PersistentSession: true}
	dials := atomic.Int32{}
	const count = 40
	var res []measure.Result
	po := measure.PublisherOptions{Topic: "m/r", QoS: 1, Size: 32, Count: count, Interval: 20 * time.Millisecond, AckWait: 10 * time.Second,
		OnResult: func(r measure.Result) { res = append(res, r) },
		Reconnect: &measure.Reconnect{Within: 10 * time.Second, Redial: func(ctx context.Context) (client.Client, error) {
			dials.Add(1)
			return client.Dial(ctx, pxURL, opts)
		}}}
	p, err := measure.NewPublisher(po)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctx, pxURL, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		// a third of the way: the broker's answers stop, then the reset
		time.Sleep(count / 3 * 20 * time.Millisecond)
		px.holding.Store(true)
		time.Sleep(150 * time.Millisecond)
		px.cut()
	}()
	sum := p.Run(ctx, c)
	if sum.Sent != count || sum.Acked != count || sum.Failed != 0 || len(res) != count {
		t.Fatalf("summary %+v (first error %v), %d results", sum, sum.FirstErr, len(res))
	}
	if len(sum.Reconnects) != 1 || sum.Reconnects[0].Err != nil || dials.Load() < 1 {
		t.Fatalf("reconnects %+v, %d dials", sum.Reconnects, dials.Load())
	}
	ev := sum.Reconnects[0]
	if ev.Resent < 1 || sum.Resent != ev.Resent || !ev.Connected.After(ev.Lost) || ev.Attempts < 1 || !errors.Is(ev.Cause, client.ErrConnectionLost) {
		t.Fatalf("reconnect event %+v", ev)
	}
	for i, r := range res {
		if r.Seq != uint32(i) || r.Err != nil || r.AcceptedNs == 0 {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	// every message arrives; the resent ones the broker had already taken
	// (their PUBACKs were held back) arrive twice
	deadline := time.Now().Add(testutil.Scale(5 * time.Second))
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == count || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	dups := 0
	for seq := range uint32(count) {
		if got[seq] == 0 {
			t.Errorf("message %d never arrived", seq)
		}
		dups += got[seq] - 1
	}
	if dups < 1 || dups > ev.Resent {
		t.Errorf("%d duplicates at the subscriber, %d messages resent: want at least one, at most the resent", dups, ev.Resent)
	}
	t.Logf("reconnected after %s (%d attempts), %d resent, %d duplicates", ev.Connected.Sub(ev.Lost), ev.Attempts, ev.Resent, dups)
}

// TestPublisherReconnectRefused: reconnection needs a dial function and a
// paced or back-to-back run.
func TestPublisherReconnectRefused(t *testing.T) {
	dial := func(context.Context) (client.Client, error) { return nil, errors.New("no") }
	for _, o := range []measure.PublisherOptions{
		{Topic: "a", Count: 1, Reconnect: &measure.Reconnect{}},
		{Topic: "a", Count: 1, ClosedLoop: true, Reconnect: &measure.Reconnect{Redial: dial}},
		{Topic: "a", Count: 1, Early: true, Reconnect: &measure.Reconnect{Redial: dial}},
	} {
		if _, err := measure.NewPublisher(o); err == nil || !strings.Contains(err.Error(), "reconnect") {
			t.Errorf("%+v: %v", o, err)
		}
	}
}
