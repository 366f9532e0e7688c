// SPDX-License-Identifier: MIT

package mqttcore

// Helpers added by iotq to the upstream tests restored from mochi-mqtt
// v2.7.9 (server_test.go, clients_test.go, ...). Upstream waited for
// asynchronous writes and listeners with sleeps of 1 to 50 ms, which lose
// packets or fail on a busy machine; these wait for the condition itself.

import (
	"net"
	"testing"
	"time"

	"github.com/iotq/iotq/internal/mqttcore/listeners"
	"github.com/iotq/iotq/internal/mqttcore/packets"
)

// waitTimeout bounds a wait: reaching it means a lost packet or a hang,
// not a slow machine.
const waitTimeout = 10 * time.Second

// waitWritten waits until every packet queued for each client has been
// written: the outbound queue is empty and its writer has returned
// (patch 11: the writer runs while packets are queued). It may run on a
// goroutine other than the test's, so it reports with t.Errorf.
func waitWritten(t testing.TB, cls ...*Client) {
	t.Helper()
	for _, cl := range cls {
		deadline := time.Now().Add(waitTimeout)
		for !outboundIdle(cl) {
			if time.Now().After(deadline) {
				t.Errorf("client %s: outbound queue not written within %v", cl.ID, waitTimeout)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
}

func outboundIdle(cl *Client) bool {
	q := &cl.State.outbound
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n == 0 && !q.writing
}

// waitServing waits until s's listener id serves (Serve starts it on a
// goroutine of its own).
func waitServing(t *testing.T, s *Server, id string) {
	t.Helper()
	l, ok := s.Listeners.Get(id)
	if !ok {
		t.Fatalf("no listener %s", id)
	}
	deadline := time.Now().Add(waitTimeout)
	for !l.(*listeners.MockListener).IsServing() {
		if time.Now().After(deadline) {
			t.Fatalf("listener %s not serving within %v", id, waitTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitClient waits until s holds a client with the id and returns it.
func waitClient(t *testing.T, s *Server, id string) *Client {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		if cl, ok := s.Clients.Get(id); ok {
			return cl
		}
		if time.Now().After(deadline) {
			t.Fatalf("client %s not connected within %v", id, waitTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// withoutSeq returns pks with their Seq cleared, for comparing with
// upstream's expected packets (patch 20 gives each in-flight packet one).
func withoutSeq(pks []packets.Packet) []packets.Packet {
	for i := range pks {
		pks[i].Seq = 0
	}
	return pks
}

// tcpPair returns both ends of a loopback TCP connection, closed when the
// test ends: conn the broker's side, peer the client's.
func tcpPair(t *testing.T) (conn, peer net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = peer.Close() })
	conn, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn, peer
}
