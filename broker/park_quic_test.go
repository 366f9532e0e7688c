package broker_test

// Idle clients of a multi-stream QUIC listener (the default) give the
// engine's reader goroutine up too (mqttcore patch 38): the transport's
// own goroutines receive the streams and wake the client. These tests
// park real QUIC clients on loopback and check that what a blocked read
// did still happens.

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/internal/testutil"
)

// engineReaders counts the goroutines reading for an MQTT client in the
// engine (running or waiting in Read; a parked client has none).
func engineReaders() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return bytes.Count(buf[:n], []byte("mqttcore.(*Client).read("))
		}
		buf = make([]byte, 2*len(buf))
	}
}

func waitEngineReaders(t *testing.T, want int, what string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := engineReaders(); n != want {
			return fmt.Errorf("%s: %d engine readers, want %d", what, n, want)
		}
		return nil
	})
}

func startParkQUICBroker(t *testing.T, park time.Duration) (*broker.Server, string) {
	t.Helper()
	return quicBroker(t, broker.Options{Store: broker.StoreNone, Flow: broker.FlowOptions{ParkIdleAfter: park}})
}

// TestIdleQUICClientsHoldNoEngineGoroutine: idle QUIC clients keep no
// reader goroutine in the engine once parked; with parking off each
// keeps one.
func TestIdleQUICClientsHoldNoEngineGoroutine(t *testing.T) {
	const n = 20
	for _, tc := range []struct {
		name string
		park time.Duration
		want int
	}{{"park", parkAfter, 0}, {"off", -1, n}} {
		t.Run(tc.name, func(t *testing.T) {
			srv, u := startParkQUICBroker(t, tc.park)
			for i := range n {
				c := dial(t, srv, u)
				t.Cleanup(func() { _ = c.Close() })
				if _, err := rawConnect(c, fmt.Sprintf("idle-%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			waitEngineReaders(t, tc.want, "idle QUIC clients")
		})
	}
}

// TestParkedQUICClientsExchangeMessages: a parked QUIC subscriber gets
// deliveries, a parked publisher's next PUBLISH is read and
// acknowledged, and a packet split across pauses longer than
// park_idle_after is read whole.
func TestParkedQUICClientsExchangeMessages(t *testing.T) {
	srv, u := startParkQUICBroker(t, parkAfter)
	subc := dial(t, srv, u)
	defer subc.Close()
	sub, _, err := rawConnectFull(subc, "sub", true, 0, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.subscribe("park/+", 1); err != nil {
		t.Fatal(err)
	}
	pubc := dial(t, srv, u)
	defer pubc.Close()
	pub, _, err := rawConnectFull(pubc, "pub", true, 0, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		waitEngineReaders(t, 0, "two parked QUIC clients")
		pub.publish("park/a", 1, uint16(i+1), []byte(fmt.Sprintf("m%d", i)))
		if err := pub.flush(); err != nil {
			t.Fatal(err)
		}
		if ack := expectPacket(t, pub, 4, 10*time.Second); len(ack) != 2 || ack[1] != byte(i+1) {
			t.Fatalf("PUBACK %v, want id %d", ack, i+1)
		}
		topic, payload, id := expectPublish(t, sub, 10*time.Second)
		if topic != "park/a" || payload != fmt.Sprintf("m%d", i) {
			t.Fatalf("got %s %q, want park/a m%d", topic, payload, i)
		}
		sub.ack(id)
		if err := sub.flush(); err != nil {
			t.Fatal(err)
		}
	}

	waitEngineReaders(t, 0, "two parked QUIC clients")
	pw := &capture{}
	pub.w.Reset(pw)
	pub.publish("park/b", 1, 77, []byte("split across pauses"))
	if err := pub.w.Flush(); err != nil {
		t.Fatal(err)
	}
	pub.w.Reset(pub.c)
	pkt := pw.b
	for _, part := range [][]byte{pkt[:1], pkt[1 : len(pkt)/2], pkt[len(pkt)/2:]} {
		time.Sleep(5 * parkAfter)
		if _, err := pub.c.Write(part); err != nil {
			t.Fatal(err)
		}
	}
	if ack := expectPacket(t, pub, 4, 10*time.Second); len(ack) != 2 || ack[1] != 77 {
		t.Fatalf("PUBACK %v, want id 77", ack)
	}
	if topic, payload, _ := expectPublish(t, sub, 10*time.Second); topic != "park/b" || payload != "split across pauses" {
		t.Fatalf("got %s %q", topic, payload)
	}
}

// TestParkedQUICClientEnds: a parked QUIC client is ended, with its Will,
// when its keep-alive expires and when its QUIC connection closes without
// DISCONNECT; closing the broker ends the parked clients left.
func TestParkedQUICClientEnds(t *testing.T) {
	srv, u := startParkQUICBroker(t, parkAfter)
	wc := dial(t, srv, u)
	defer wc.Close()
	watcher, _, err := rawConnectFull(wc, "will-watcher", true, 0, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := watcher.subscribe("will/#", 0); err != nil {
		t.Fatal(err)
	}

	t.Run("keep-alive", func(t *testing.T) {
		qc := dial(t, srv, u)
		defer qc.Close()
		start := time.Now()
		quiet, _, err := rawConnectFull(qc, "quiet", true, 2, "will/quiet", "gone")
		if err != nil {
			t.Fatal(err)
		}
		waitEngineReaders(t, 0, "parked QUIC clients")
		expectClosed(t, quiet.c, 20*time.Second, "1.5 x keep-alive")
		if d := time.Since(start); d < 2900*time.Millisecond {
			t.Fatalf("closed after %v, before 1.5 x keep-alive (3 s)", d)
		}
		if topic, payload, _ := expectPublish(t, watcher, 10*time.Second); topic != "will/quiet" || payload != "gone" {
			t.Fatalf("Will: got %s %q", topic, payload)
		}
	})

	t.Run("connection closed", func(t *testing.T) {
		gc := dial(t, srv, u)
		if _, _, err := rawConnectFull(gc, "goner", true, 0, "will/goner", "left"); err != nil {
			t.Fatal(err)
		}
		waitEngineReaders(t, 0, "parked QUIC clients")
		_ = gc.Close() // the QUIC connection ends without DISCONNECT
		if topic, payload, _ := expectPublish(t, watcher, 10*time.Second); topic != "will/goner" || payload != "left" {
			t.Fatalf("Will: got %s %q", topic, payload)
		}
	})

	t.Run("broker closes", func(t *testing.T) {
		waitEngineReaders(t, 0, "parked QUIC clients")
		done := make(chan error, 1)
		go func() { done <- srv.Close() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("close: %v", err)
			}
		case <-time.After(testutil.Scale(30 * time.Second)):
			t.Fatal("Close did not return within 30 s with a parked QUIC client")
		}
		expectClosed(t, watcher.c, 5*time.Second, "the broker closed")
	})
}
