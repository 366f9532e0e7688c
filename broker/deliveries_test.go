package broker_test

import (
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/internal/testutil"
)

// The publisher's reader writes deliveries itself (engine patch 40): a
// write that does not wait, and the rest to a write goroutine when the
// subscriber's socket is full. MQTT 3.1.1 section 4.6 ([MQTT-4.6.0-6]):
// a subscriber receives one publisher's messages on a topic in the order
// they were published. Here the subscriber's receive buffer is small and
// it does not read at first, so the broker's writes to it come back
// partial. First a burst the broker reads at once and that its writes to
// the subscriber cannot take, then nothing more: what is left must still
// be written. Then a stream long enough for the queue to fill, so the
// publisher is held back and the role passes to write goroutines
// mid-stream. Every message must arrive, once, in order.
func TestDeliveriesKeepOrderThroughAFullSocket(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{Listen: []string{"mqtt://127.0.0.1:0"}, StateDir: t.TempDir(), Store: broker.StoreNone})
	addr := strings.TrimPrefix(srv.Endpoints()[0], "mqtt://")

	// The receive buffer is set before the connection opens: the window
	// it advertised then is never shrunk.
	small := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); err != nil {
			return err
		}
		return serr
	}}
	sc, err := small.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	sub, err := rawConnect(sc, "slow-sub")
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.subscribe("order/x", 0); err != nil {
		t.Fatal(err)
	}

	pc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	pub, err := rawConnect(pc, "fast-pub")
	if err != nil {
		t.Fatal(err)
	}
	next := 0 // sequence number of the next message published
	send := func(n, perWrite int) error {
		payload := make([]byte, 100)
		for i := range n {
			binary.BigEndian.PutUint64(payload, uint64(next))
			next++
			pub.publish("order/x", 0, 0, payload)
			if i%perWrite == perWrite-1 {
				if err := pub.flush(); err != nil {
					return err
				}
			}
		}
		return pub.flush()
	}
	received := 0
	receive := func(n int) {
		t.Helper()
		_ = sc.SetReadDeadline(time.Now().Add(testutil.Scale(60 * time.Second)))
		for range n {
			typ, flags, body, err := sub.read()
			if err != nil {
				t.Fatalf("after %d messages: %v", received, err)
			}
			if typ != 3 {
				t.Fatalf("after %d messages: packet type %d, want PUBLISH", received, typ)
			}
			_, _, _, payload, err := parsePublish(flags, body)
			if err != nil || len(payload) < 8 {
				t.Fatalf("message %d: %v (payload %d bytes)", received, err, len(payload))
			}
			if got := binary.BigEndian.Uint64(payload); got != uint64(received) {
				t.Fatalf("message %d of the stream carries sequence number %d: lost, duplicated or reordered", received, got)
			}
			received++
		}
	}

	// 31 KB in one write: more than the subscriber's socket buffers take, less
	// than a reader writes at once (32 KiB).
	if err := send(280, 280); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	receive(280)

	const stream = 3000
	sent := make(chan error, 1)
	go func() { sent <- send(stream, 50) }() // many PUBLISH packets per write, as a fast client sends them
	time.Sleep(300 * time.Millisecond)
	receive(stream)
	if err := <-sent; err != nil {
		t.Fatalf("publisher: %v", err)
	}
}

// A delivery the publisher's reader holds must not wait for that
// publisher's next input: here the publisher sends one whole PUBLISH and
// the first bytes of a second, then nothing. The subscriber must get the
// first message, and a second publisher's message on the same topic, while
// the first publisher's packet stays incomplete.
func TestDeliveryNotHeldByAStalledPublisher(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{Listen: []string{"mqtt://127.0.0.1:0"}, StateDir: t.TempDir(), Store: broker.StoreNone})
	addr := strings.TrimPrefix(srv.Endpoints()[0], "mqtt://")
	conn := func() (*rawClient, net.Conn) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		rc, err := rawConnect(c, fmt.Sprintf("c%p", c))
		if err != nil {
			t.Fatal(err)
		}
		return rc, c
	}
	sub, sc := conn()
	if err := sub.subscribe("stall/x", 1); err != nil {
		t.Fatal(err)
	}
	expect := func(want string) {
		t.Helper()
		_ = sc.SetReadDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
		typ, flags, body, err := sub.read()
		if err != nil {
			t.Fatalf("waiting for %q: %v", want, err)
		}
		_, qos, id, payload, err := parsePublish(flags, body)
		if typ != 3 || err != nil || string(payload) != want {
			t.Fatalf("got type %d payload %q (%v), want PUBLISH %q", typ, payload, err, want)
		}
		if qos > 0 {
			sub.ack(id)
			_ = sub.flush()
		}
	}

	stalled, _ := conn()
	stalled.publish("stall/x", 1, 1, []byte("whole"))
	var half []byte
	half = appendVarint(append(half, 0x32), 2+len("stall/x")+2+5)
	half = appendStr(half, "stall") // the topic's first bytes only
	_, _ = stalled.w.Write(half)
	if err := stalled.flush(); err != nil {
		t.Fatal(err)
	}
	expect("whole")

	other, _ := conn()
	other.publish("stall/x", 1, 1, []byte("other"))
	if err := other.flush(); err != nil {
		t.Fatal(err)
	}
	expect("other")
}

// A healthy subscriber is not taken for a slow one when a publisher sends
// many small messages at once. One read of the publisher's input (4 KiB)
// holds about 600 of these 7-byte PUBLISH packets, more than half the
// subscriber's queue (512), which makes the flow hook hold the publisher
// back until the subscriber makes progress. The subscriber's packets were
// waiting for the publisher's reader to write them (engine patch 40), so
// no progress came: after max_stall (2 s) the subscriber was marked
// stalled and messages were dropped (engine patch 51 hands the writes
// over before the wait). MQTT 3.1.1 section 4.6: every message arrives,
// in order.
func TestSmallMessageBurstReachesAHealthySubscriber(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{Listen: []string{"mqtt://127.0.0.1:0"}, StateDir: t.TempDir(), Store: broker.StoreNone})
	addr := strings.TrimPrefix(srv.Endpoints()[0], "mqtt://")
	dial := func(id string) (*rawClient, net.Conn) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		rc, err := rawConnect(c, id)
		if err != nil {
			t.Fatal(err)
		}
		return rc, c
	}
	sub, sc := dial("burst-sub")
	if err := sub.subscribe("b", 0); err != nil {
		t.Fatal(err)
	}
	pub, _ := dial("burst-pub")

	const n = 5000
	var seq [2]byte
	for i := range n {
		binary.BigEndian.PutUint16(seq[:], uint16(i))
		pub.publish("b", 0, 0, seq[:])
	}
	if err := pub.flush(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		// Each message well within max_stall: a subscriber taken for a
		// stalled one waits 2 s, then loses messages.
		_ = sc.SetReadDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
		typ, flags, body, err := sub.read()
		if err != nil {
			t.Fatalf("after %d of %d messages: %v", i, n, err)
		}
		_, _, _, payload, err := parsePublish(flags, body)
		if typ != 3 || err != nil || len(payload) != 2 {
			t.Fatalf("message %d: type %d, %v, payload %x", i, typ, err, payload)
		}
		if got := binary.BigEndian.Uint16(payload); got != uint16(i) {
			t.Fatalf("message %d of the burst carries sequence number %d: %d lost before it (or reordered)", i, got, int(got)-i)
		}
	}
}
