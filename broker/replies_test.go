package broker_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
)

// A publisher that streams QoS 1 messages and DISCONNECTs in the same
// write gets one PUBACK per message, each with its packet identifier, in
// order, before the broker closes the connection (MQTT 3.1.1 section
// 4.6): the broker batches its answers to buffered input (engine patch
// 31) and must flush them before it handles the DISCONNECT. Without and
// with the store (whose acknowledgements wait for the commit).
func TestPubacksOfBufferedPublishesBeforeDisconnect(t *testing.T) {
	for _, store := range []string{broker.StoreNone, broker.StoreBolt} {
		t.Run(store, func(t *testing.T) {
			srv, _ := startMatrixBroker(t, broker.Options{Store: store, StateDir: t.TempDir()})
			for _, u := range srv.Endpoints() {
				t.Run(u[:strings.Index(u, ":")], func(t *testing.T) { burstThenDisconnect(t, srv, u) })
			}
		})
	}
}

func burstThenDisconnect(t *testing.T, srv *broker.Server, u string) {
	rc, err := rawConnect(dial(t, srv, u), "burst")
	if err != nil {
		t.Fatal(err)
	}
	const n = 500
	for i := 1; i <= n; i++ {
		rc.publish("burst/t", 1, uint16(i), []byte("m"))
	}
	rc.w.Write([]byte{0xe0, 0}) // DISCONNECT, same write
	if err := rc.flush(); err != nil {
		t.Fatal(err)
	}
	_ = rc.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	next := uint16(1)
	for {
		typ, _, b, err := rc.read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %d PUBACKs: %v", next-1, err)
		}
		if typ != 4 || len(b) < 2 {
			t.Fatalf("packet type %d (body %v), want PUBACK", typ, b)
		}
		if id := uint16(b[0])<<8 | uint16(b[1]); id != next {
			t.Fatalf("PUBACK for %d, want %d", id, next)
		}
		next++
	}
	if got := int(next - 1); got != n {
		t.Fatalf("%d PUBACKs before the broker closed, want %d", got, n)
	}
}
