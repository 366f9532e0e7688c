package broker_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/internal/testutil"
)

// TestReconnectUnderLoadKeepsOrder: a QoS 1 subscriber whose connection
// drops while a publisher keeps publishing to its topic reconnects and
// gets the messages it had not acknowledged again, and then the rest.
// "When a stream of messages is published and subscribed to an Ordered
// Topic with QoS 1, the final copy of each message received by the
// subscribers will be in the order that they were published" (MQTT 5.0
// section 4.6; [MQTT-4.6.0-6], 3.1.1 [MQTT-4.6.0-6]): no new message may
// reach the client before the resent copy of an earlier one. Under a
// Receive Maximum the messages must keep flowing, too: the quota a
// message takes comes back with its PUBACK, whatever the connection.
func TestReconnectUnderLoadKeepsOrder(t *testing.T) {
	t.Run("connection closed", func(t *testing.T) { testReconnectOrder(t, false, 0) })
	// The new connection takes the session over from one still open
	// (MQTT-3.1.4-3), which goes on receiving until the takeover.
	t.Run("session taken over", func(t *testing.T) { testReconnectOrder(t, true, 0) })
	// With a Receive Maximum the broker holds back what exceeds it
	// [MQTT-3.3.4-9]: resent and new messages alike wait for quota.
	t.Run("MQTT 5 receive maximum", func(t *testing.T) { testReconnectOrder(t, false, 100) })
	t.Run("MQTT 5 receive maximum, taken over", func(t *testing.T) { testReconnectOrder(t, true, 100) })
}

// testReconnectOrder runs the test over MQTT 3.1.1, or over MQTT 5 with
// the client's Receive Maximum receiveMax if that is not 0.
func testReconnectOrder(t *testing.T, takeover bool, receiveMax uint16) {
	const (
		total   = 3000
		dropAt  = 1000 // the connection goes after this many deliveries
		lagAcks = 50   // the subscriber acknowledges this far behind
		// about 5 messages a millisecond are published
		backlogFor = 80 * time.Millisecond
	)
	srv := brokertest.Start(t, broker.Options{StateDir: t.TempDir()})
	u := brokertest.Endpoint(t, srv, "mqtt")
	connect := func() (*sessionClient, bool) {
		if receiveMax == 0 {
			return connectSession(t, srv, u, "ordered", false)
		}
		return connectSessionProps(t, srv, u, "ordered", true, []byte{0x21, byte(receiveMax >> 8), byte(receiveMax)})
	}
	sub, _ := connect()
	if code, _ := sub.subscribeID(t, 1, "ord/#"); code != 1 {
		t.Fatalf("SUBSCRIBE: reason code %#x", code)
	}

	pc := dial(t, srv, u)
	t.Cleanup(func() { pc.Close() })
	pub, err := rawConnect(pc, "ordered-pub")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the publisher's PUBACKs: read and dropped
		defer wg.Done()
		_ = pc.SetReadDeadline(time.Now().Add(testutil.Scale(60 * time.Second)))
		for acked := 0; acked < total; {
			typ, _, _, err := pub.read()
			if err != nil {
				return
			}
			if typ == 4 {
				acked++
			}
		}
	}()
	go func() { // paced, so that publishing goes on across the reconnect
		for i := 1; i <= total; i++ {
			pub.publish("ord/x", 1, uint16(i), []byte(strconv.Itoa(i)))
			if i%5 == 0 {
				if err := pub.flush(); err != nil {
					return
				}
				time.Sleep(time.Millisecond)
			}
		}
		_ = pub.flush()
	}()
	t.Cleanup(func() { pc.Close(); wg.Wait() })

	var seq []int // payloads in the order received, over both connections
	read := func(sc *sessionClient, until func() bool) {
		t.Helper()
		var unacked []uint16
		for !until() {
			p, ok := sc.nextPublish(t, testutil.Scale(10*time.Second))
			if !ok {
				t.Fatalf("after %d deliveries (last %v): no more", len(seq), seq[max(0, len(seq)-5):])
			}
			n, err := strconv.Atoi(p.payload)
			if err != nil {
				t.Fatalf("payload %q", p.payload)
			}
			seq = append(seq, n)
			unacked = append(unacked, p.id)
			if len(unacked) > lagAcks {
				sc.ack(unacked[0])
				unacked = unacked[1:]
				if err := sc.flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	read(sub, func() bool { return len(seq) >= dropAt })
	if !takeover {
		_ = sub.c.Close()
	}
	// A backlog of a few hundred messages for the new connection to
	// resend while new ones keep coming: the longer the resend, the
	// likelier a new delivery gets between its packets if it can.
	time.Sleep(backlogFor)
	again, present := connect()
	if !present {
		t.Fatal("CONNACK session present 0 for a persistent session")
	}
	done := func() bool { return len(seq) > 0 && seq[len(seq)-1] == total }
	read(again, done)

	last := map[int]int{} // message -> position of its final copy
	for pos, n := range seq {
		last[n] = pos
	}
	for n := 1; n <= total; n++ {
		if _, ok := last[n]; !ok {
			t.Fatalf("message %d never arrived", n)
		}
		if n > 1 && last[n] < last[n-1] {
			from := max(0, last[n]-3)
			t.Fatalf("the final copy of message %d came before that of message %d (positions %d, %d; around: %s)",
				n, n-1, last[n], last[n-1], fmtSeq(seq[from:min(len(seq), last[n-1]+3)]))
		}
	}
}

func fmtSeq(s []int) string {
	parts := make([]string, len(s))
	for i, n := range s {
		parts[i] = fmt.Sprint(n)
	}
	return strings.Join(parts, " ")
}
