package broker_test

// Memory bounded in bytes: what one stuck subscriber, floods of malformed
// or oversized input and SUBSCRIBE floods make the broker hold. The broker
// runs in this process, so the heap is measured with runtime.ReadMemStats
// after a GC (heapInUse), not RSS; the load is raw MQTT (rawmqtt_test.go),
// which holds next to nothing itself. Bounds are generous against what the
// code holds now and far below what it held before (quoted per test).

import (
	"bytes"
	"fmt"
	"net"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/internal/mqttcore"
	"github.com/iotq/iotq/internal/mqttcore/packets"
	"github.com/iotq/iotq/internal/testutil"
)

// settledHeap returns the heap in use after two garbage collections (the
// second clears what sync.Pools kept through the first).
func settledHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// addrOf returns the host:port of an mqtt:// endpoint.
func addrOf(u string) string { return strings.TrimPrefix(u, "mqtt://") }

// publishWindow publishes n QoS 1 messages of size bytes on topic through
// rc, at most window unacknowledged, and waits for every PUBACK.
func publishWindow(t *testing.T, rc *rawClient, topic string, n, size, window int) {
	t.Helper()
	slots := make(chan struct{}, window)
	done := make(chan error, 1)
	go func() {
		for acked := 0; acked < n; {
			typ, _, _, err := rc.read()
			if err != nil {
				done <- fmt.Errorf("after %d PUBACKs: %w", acked, err)
				return
			}
			if typ == 4 {
				acked++
				<-slots
			}
		}
		done <- nil
	}()
	payload := make([]byte, size)
	deadline := time.After(testutil.Scale(120 * time.Second))
	for i := range n {
		select {
		case slots <- struct{}{}:
		case err := <-done:
			t.Fatalf("publish %d: %v", i, err)
		case <-deadline:
			t.Fatalf("publish %d: no PUBACK for the window of %d", i, window)
		}
		copy(payload, fmt.Sprintf("%0*d", size, i))
		rc.publish(topic, 1, uint16(i%65535+1), payload)
		if len(slots) == window || i == n-1 {
			if err := rc.flush(); err != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-deadline:
		t.Fatalf("not every PUBACK of %d arrived", n)
	}
}

// TestStuckSubscriberMemoryBounded: a persistent QoS 1 subscriber that
// stops reading, and 70 000 messages of 20 bytes at the default limits.
// limits.max_queued_bytes (8 MiB) counts what a held message costs
// (mqttcore.QueuedCost: payload, topic and 176 bytes of structure),
// so the session holds at most about 48 000 of them and the heap grows by
// about 9 MB. Before, the limit counted 21 bytes per message: the session
// held 65 535 messages (max_inflight) of 825 bytes each (54 MB of heap),
// the engine copied all of them once a second (RSS 270-350 MB) and
// publishing ran at 665-2 800 messages/s.
func TestStuckSubscriberMemoryBounded(t *testing.T) {
	const n, size = 70000, 20
	for _, store := range []string{broker.StoreNone, broker.StoreBolt} {
		t.Run("store="+store, func(t *testing.T) {
			srv := brokertest.Start(t, broker.Options{StateDir: t.TempDir(), Store: store, Metrics: "127.0.0.1:0"})
			u := brokertest.Endpoint(t, srv, "mqtt")
			c := dialRaw(t, addrOf(u))
			_ = c.(*net.TCPConn).SetReadBuffer(4096)
			stuck, err := rawConnectSession(c, "stuck", false)
			if err != nil {
				t.Fatal(err)
			}
			if err := stuck.subscribe("mem/stuck", 1); err != nil {
				t.Fatal(err)
			}
			pub, err := rawConnect(dialRaw(t, addrOf(u)), "pub")
			if err != nil {
				t.Fatal(err)
			}
			before := settledHeap()
			publishWindow(t, pub, "mem/stuck", n, size, 100)
			after := settledHeap()
			m := metricsText(t, srv)
			queued := metricValue(m, `iotq_broker_queued_bytes{stat="max"}`)
			held := metricValue(m, "iotq_broker_inflight_messages")
			dropped := metricValue(m, `iotq_broker_messages_dropped_total{qos="1",reason="queued_bytes"}`)
			growth := int64(after) - int64(before)
			t.Logf("%d x %d B to a stuck subscriber: session holds %.0f messages, %.0f bytes as counted; %.0f not queued (queued_bytes); heap %d KiB -> %d KiB (%+d KiB, %.0f B per held message)",
				n, size, held, queued, dropped, before>>10, after>>10, growth>>10, float64(growth)/max(held, 1))
			if queued > broker.DefaultMaxQueuedBytes {
				t.Errorf("the session holds %.0f bytes, more than max_queued_bytes %d", queued, broker.DefaultMaxQueuedBytes)
			}
			if held <= 0 || dropped <= 0 {
				t.Errorf("the stuck session holds %.0f messages and %.0f were not queued: the limit did not apply", held, dropped)
			}
			if growth > 32<<20 {
				t.Errorf("heap grew by %d KiB, want less than 32 MiB (max_queued_bytes is 8 MiB)", growth>>10)
			}
			if held > 0 && float64(growth)/held > 400 {
				t.Errorf("%.0f bytes of heap per held message, want at most 400", float64(growth)/held)
			}
		})
	}
}

// v5Connect is an MQTT 5 CONNECT (clean start, no session expiry) with
// props as its encoded properties.
func v5Connect(id string, props []byte) []byte {
	var body []byte
	body = appendStr(body, "MQTT")
	body = append(body, 5, 0x02, 0, 60)
	body = appendVarint(body, len(props))
	body = append(body, props...)
	body = appendStr(body, id)
	return append(appendVarint([]byte{0x10}, len(body)), body...)
}

// emptyUserProps returns n bytes of empty user properties (5 bytes each).
func emptyUserProps(n int) []byte {
	return bytes.Repeat([]byte{38, 0, 0, 0, 0}, n/5)
}

// TestFloodMemory: what connections that announce more than they send,
// and packets full of properties, make the broker hold, and that it all
// goes once they leave. Before (measured with the iotq binary, 2 cores):
// a CONNECT header announcing 16 MiB allocated 16 MiB at once, before a
// byte of it arrived (40 connections x 10 rounds: 3.3 GB allocated, RSS
// 1 GB), a PUBLISH likewise; 20 PUBLISH packets of 15 MiB of user
// properties decoded into 3.4 million properties each and took RSS past
// 4 GB, still rising after the clients left. Now a CONNECT larger than 64
// KiB closes the connection unread, a packet body gets memory as its bytes
// arrive, and a packet with more than 1024 user properties does not decode.
func TestFloodMemory(t *testing.T) {
	const conns = 16
	srv := brokertest.Start(t, broker.Options{StateDir: t.TempDir(), Metrics: "127.0.0.1:0"})
	u := brokertest.Endpoint(t, srv, "mqtt")
	healthy := newHealthProbe(t, srv, u, "healthy")
	healthy.check(t, "before the flood")
	before := settledHeap()

	var open []net.Conn
	// CONNECT headers announcing 8 MiB, 4 KiB sent.
	announced := append(appendVarint([]byte{0x10}, 8<<20), make([]byte, 4096)...)
	var bigConnect []net.Conn
	for range conns {
		c := dialRaw(t, addrOf(u))
		send(t, c, announced)
		bigConnect = append(bigConnect, c)
	}
	// After CONNECT, PUBLISH headers announcing 8 MiB, 4 KiB sent.
	announcedPub := append(appendVarint([]byte{0x30}, 8<<20), make([]byte, 4096)...)
	for i := range conns {
		c := dialRaw(t, addrOf(u))
		if _, err := rawConnect(c, fmt.Sprintf("announce-%d", i)); err != nil {
			t.Fatal(err)
		}
		send(t, c, announcedPub)
		open = append(open, c)
	}
	// MQTT 5 CONNECTs with 60 000 bytes of user properties (12 000),
	// which the session would keep.
	var propConnect []net.Conn
	for i := range conns {
		c := dialRaw(t, addrOf(u))
		send(t, c, v5Connect(fmt.Sprintf("props-%d", i), emptyUserProps(60000)))
		propConnect = append(propConnect, c)
	}
	// After an MQTT 5 CONNECT, a PUBLISH of 4 MiB of user properties.
	var propPublish []net.Conn
	for i := range conns {
		c := dialRaw(t, addrOf(u))
		send(t, c, v5Connect(fmt.Sprintf("pubprops-%d", i), nil))
		var body []byte
		body = appendStr(body, "flood/props")
		props := emptyUserProps(4 << 20)
		body = appendVarint(body, len(props))
		body = append(body, props...)
		body = append(body, 'x')
		// The broker refuses it after its first 64 KiB and closes the
		// connection, perhaps while this write still runs.
		_ = c.SetWriteDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
		_, _ = c.Write(append(appendVarint([]byte{0x30}, len(body)), body...))
		propPublish = append(propPublish, c)
	}
	time.Sleep(testutil.Scale(time.Second)) // let the broker read what arrived
	during := settledHeap()
	growth := int64(during) - int64(before)
	t.Logf("heap with %d connections of each kind open: %d KiB -> %d KiB (%+d KiB)", conns, before>>10, during>>10, growth>>10)
	if growth > 16<<20 {
		t.Errorf("heap grew by %d KiB while the connections were open, want less than 16 MiB", growth>>10)
	}
	for i, c := range bigConnect {
		expectClosed(t, c, 10*time.Second, fmt.Sprintf("a CONNECT announcing 8 MiB (#%d)", i))
	}
	for i, c := range propConnect {
		expectClosed(t, c, 10*time.Second, fmt.Sprintf("a CONNECT with 12 000 user properties (#%d)", i))
	}
	for i, c := range propPublish {
		expectClosed(t, c, 10*time.Second, fmt.Sprintf("a PUBLISH with 840 000 user properties (#%d)", i))
	}
	healthy.check(t, "during the flood")
	for _, c := range open {
		_ = c.Close()
	}
	waitGauge(t, srv, "iotq_broker_sessions_connected", 2) // the probe's two clients
	after := settledHeap()
	t.Logf("heap after the clients left: %d KiB (%+d KiB)", after>>10, (int64(after)-int64(before))>>10)
	if d := int64(after) - int64(before); d > 4<<20 {
		t.Errorf("heap stayed %d KiB above its start after the clients left, want less than 4 MiB", d>>10)
	}
}

// send writes b to c.
func send(t *testing.T, c net.Conn, b []byte) {
	t.Helper()
	_ = c.SetWriteDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
	if _, err := c.Write(b); err != nil {
		t.Fatalf("write %d bytes: %v", len(b), err)
	}
}

// waitGauge waits until the sum of the metric family name (over its labels)
// is want.
func waitGauge(t *testing.T, srv *broker.Server, name string, want float64) {
	t.Helper()
	deadline := time.Now().Add(testutil.Scale(30 * time.Second))
	for {
		var sum float64
		for _, line := range strings.Split(metricsText(t, srv), "\n") {
			if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
				var v float64
				if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
					sum += v
				}
			}
		}
		if sum == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %.0f, want %.0f", name, sum, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSubscribeFloodMemory: 100 clean sessions subscribe to 1000 filters
// each at once and leave. Subscriptions of a session that ends with its
// connection are not stored, a persistent session's are stored in one
// transaction per SUBSCRIBE (and removed in one at the end), and the heap
// comes back. Before: one bbolt transaction per filter on subscribe and
// another on disconnect; 600 such clients allocated 40 GB in bbolt, took
// 95 s and RSS to 1.6 GB, still rising after the clients left.
func TestSubscribeFloodMemory(t *testing.T) {
	const clients, filters = 100, 1000
	state := t.TempDir()
	opts := broker.Options{StateDir: state, Metrics: "127.0.0.1:0"}
	srv := brokertest.Start(t, opts)
	u := brokertest.Endpoint(t, srv, "mqtt")
	before := settledHeap()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", addrOf(u), testutil.Scale(10*time.Second))
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			rc, err := rawConnect(c, fmt.Sprintf("flood-%d", i))
			if err != nil {
				errs <- err
				return
			}
			fs := make([]string, filters)
			for f := range fs {
				fs[f] = fmt.Sprintf("flood/%d/%d/+/x", i, f)
			}
			if err := subscribeAll(rc, fs); err != nil {
				errs <- fmt.Errorf("client %d: %w", i, err)
				return
			}
			rc.disconnect()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	waitGauge(t, srv, "iotq_broker_sessions_connected", 0)
	waitGauge(t, srv, "iotq_broker_subscriptions", 0)
	after := settledHeap()
	t.Logf("%d clean sessions x %d filters: heap %d KiB -> %d KiB after they left (%+d KiB)", clients, filters, before>>10, after>>10, (int64(after)-int64(before))>>10)
	if d := int64(after) - int64(before); d > 8<<20 {
		t.Errorf("heap stayed %d KiB above its start after the clients left, want less than 8 MiB", d>>10)
	}

	// A persistent session's 1000 filters are stored (and restored).
	rc, err := rawConnectSession(dialRaw(t, addrOf(u)), "keeper", false)
	if err != nil {
		t.Fatal(err)
	}
	fs := make([]string, filters)
	for f := range fs {
		fs[f] = fmt.Sprintf("keep/%d", f)
	}
	if err := subscribeAll(rc, fs); err != nil {
		t.Fatal(err)
	}
	rc.disconnect()
	waitGauge(t, srv, "iotq_broker_sessions_connected", 0)
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if got := storedSubscriptions(t, state); got != filters {
		t.Errorf("store holds %d subscriptions, want the persistent session's %d (none of the clean sessions')", got, filters)
	}
	srv2 := brokertest.Start(t, opts)
	if _, err := rawConnectSession(dialRaw(t, addrOf(brokertest.Endpoint(t, srv2, "mqtt"))), "keeper", false); err != nil {
		t.Fatal(err)
	}
	if got := sessionSubscriptions(srv2, "keeper", filters); got != filters {
		t.Errorf("after a restart the session has %d subscriptions, want %d", got, filters)
	}
}

// sessionSubscriptions returns the subscriptions of the connected client
// id, waiting a little for want (CONNACK precedes the connection's becoming
// the session's: the count reads 0 until then).
func sessionSubscriptions(srv *broker.Server, id string, want int) int {
	deadline := time.Now().Add(testutil.Scale(5 * time.Second))
	for {
		got := srv.Subscriptions(id)
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// subscribeAll subscribes rc to filters (QoS 0) in one SUBSCRIBE and checks
// that the SUBACK grants them all.
func subscribeAll(rc *rawClient, filters []string) error {
	rc.w.Write(subscribePacket(1, filters...))
	if err := rc.flush(); err != nil {
		return err
	}
	_ = rc.c.SetReadDeadline(time.Now().Add(testutil.Scale(30 * time.Second)))
	defer rc.c.SetReadDeadline(time.Time{})
	for {
		typ, _, b, err := rc.read()
		if err != nil {
			return fmt.Errorf("suback: %w", err)
		}
		if typ != 9 {
			continue
		}
		if len(b) != 2+len(filters) {
			return fmt.Errorf("suback of %d codes for %d filters", len(b)-2, len(filters))
		}
		for i, code := range b[2:] {
			if code > 2 {
				return fmt.Errorf("filter %q refused: 0x%02x", filters[i], code)
			}
		}
		return nil
	}
}

// storedSubscriptions counts the subscription records in the state
// directory's store (the broker must be closed).
func storedSubscriptions(t *testing.T, state string) int {
	t.Helper()
	db, err := bbolt.Open(filepath.Join(state, "store.db"), 0o600, &bbolt.Options{Timeout: 2 * time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := 0
	err = db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(_ []byte, b *bbolt.Bucket) error {
			return b.ForEach(func(k, _ []byte) error {
				if bytes.HasPrefix(k, []byte("SUB_")) {
					n++
				}
				return nil
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRefusedFiltersNotRestored: filters refused at SUBSCRIBE are not
// stored. mochi stored every filter of a SUBSCRIBE with its reason code
// as QoS, so after a restart a persistent session was subscribed to the
// filters it had been refused (here by limits.max_subscriptions; an ACL
// refusal was stored alike) and received their messages.
func TestRefusedFiltersNotRestored(t *testing.T) {
	state := t.TempDir()
	opts := broker.Options{StateDir: state, Metrics: "127.0.0.1:0", Limits: broker.LimitsOptions{MaxSubscriptions: 2}}
	srv := brokertest.Start(t, opts)
	u := brokertest.Endpoint(t, srv, "mqtt")
	rc, err := rawConnectSession(dialRaw(t, addrOf(u)), "limited", false)
	if err != nil {
		t.Fatal(err)
	}
	rc.w.Write(subscribePacket(1, "ok/1", "ok/2", "refused/3"))
	if err := rc.flush(); err != nil {
		t.Fatal(err)
	}
	_ = rc.c.SetReadDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
	typ, _, b, err := rc.read()
	if err != nil || typ != 9 || len(b) != 5 || b[2] != 0 || b[3] != 0 || b[4] != 0x80 {
		t.Fatalf("SUBACK: type %d %v %v, want codes 0 0 0x80", typ, b, err)
	}
	rc.disconnect()
	waitGauge(t, srv, "iotq_broker_sessions_connected", 0)
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if got := storedSubscriptions(t, state); got != 2 {
		t.Errorf("store holds %d subscriptions, want the 2 granted", got)
	}

	srv2 := brokertest.Start(t, opts)
	u2 := brokertest.Endpoint(t, srv2, "mqtt")
	rc, err = rawConnectSession(dialRaw(t, addrOf(u2)), "limited", false)
	if err != nil {
		t.Fatal(err)
	}
	if got := sessionSubscriptions(srv2, "limited", 2); got != 2 {
		t.Errorf("after a restart the session has %d subscriptions, want the 2 granted", got)
	}
	pub, err := rawConnect(dialRaw(t, addrOf(u2)), "pub")
	if err != nil {
		t.Fatal(err)
	}
	pub.publish("refused/3", 0, 0, []byte("must not arrive"))
	pub.publish("ok/1", 0, 0, []byte("arrives"))
	if err := pub.flush(); err != nil {
		t.Fatal(err)
	}
	_ = rc.c.SetReadDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
	for {
		typ, flags, b, err := rc.read()
		if err != nil {
			t.Fatalf("waiting for the message on ok/1: %v", err)
		}
		if typ != 3 {
			continue
		}
		topic, _, _, payload, err := parsePublish(flags, b)
		if err != nil {
			t.Fatal(err)
		}
		if topic == "refused/3" {
			t.Fatalf("received %q on a filter refused before the restart", payload)
		}
		if topic == "ok/1" {
			return
		}
	}
}

// TestEmptyCoversEveryField: packets.Properties.Empty and
// packets.ConnectParams.Empty decide whether the in-flight store keeps a
// packet's properties (and whether it keeps it compact); a field they
// missed would be lost for packets that set only that field.
func TestEmptyCoversEveryField(t *testing.T) {
	check := func(v reflect.Value, empty func() bool, name string) {
		t.Helper()
		if !empty() {
			t.Fatalf("zero %s is not Empty", name)
		}
		for i := range v.NumField() {
			f := v.Field(i)
			switch f.Kind() {
			case reflect.String:
				f.SetString("x")
			case reflect.Bool:
				f.SetBool(true)
			case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
				f.SetUint(1)
			case reflect.Slice:
				f.Set(reflect.MakeSlice(f.Type(), 0, 0)) // empty but not nil
			case reflect.Struct:
				f.Field(0).Set(reflect.MakeSlice(f.Field(0).Type(), 0, 0))
			case reflect.Pointer: // to a struct whose first field is a slice
				n := reflect.New(f.Type().Elem())
				n.Elem().Field(0).Set(reflect.MakeSlice(n.Elem().Field(0).Type(), 0, 0))
				f.Set(n)
			default:
				t.Fatalf("%s.%s: kind %s not covered by this test", name, v.Type().Field(i).Name, f.Kind())
			}
			if empty() {
				t.Errorf("%s with %s set is Empty", name, v.Type().Field(i).Name)
			}
			f.Set(reflect.Zero(f.Type()))
		}
	}
	var p packets.Properties
	check(reflect.ValueOf(&p).Elem(), p.Empty, "Properties")
	var c packets.ConnectParams
	check(reflect.ValueOf(&c).Elem(), c.Empty, "ConnectParams")

	// QueuedCost counts properties when there are any.
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}, TopicName: "a", Payload: []byte("b")}
	bare := mqttcore.QueuedCost(&pk)
	pk.Properties.User = []packets.UserProperty{{Key: "k", Val: "v"}}
	if withProps := mqttcore.QueuedCost(&pk); withProps <= bare+32 {
		t.Errorf("QueuedCost with a user property %d, without %d: properties not counted", withProps, bare)
	}
}
