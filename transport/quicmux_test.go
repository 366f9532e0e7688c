package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// Multi-stream MQTT over QUIC at the transport level: a fake MQTT engine
// reads the listener's conn; a raw quic-go client opens the streams as an
// MQTT-next client would.

func mqttPacket(typ byte, body ...byte) []byte {
	b := []byte{typ}
	n := len(body)
	for {
		d := byte(n % 128)
		n /= 128
		if n > 0 {
			d |= 0x80
		}
		b = append(b, d)
		if n == 0 {
			break
		}
	}
	return append(b, body...)
}

// v5Connect is a minimal MQTT 5 CONNECT.
var v5Connect = mqttPacket(0x10, 0, 4, 'M', 'Q', 'T', 'T', 5, 2, 0, 30, 0, 0, 1, 'c')

func publishQoS1(topic string, id uint16, payload string) []byte {
	body := []byte{byte(len(topic) >> 8), byte(len(topic))}
	body = append(body, topic...)
	body = append(body, byte(id>>8), byte(id), 0) // id, no properties
	return mqttPacket(0x32, append(body, payload...)...)
}

func readMQTT(t *testing.T, r io.Reader) []byte {
	t.Helper()
	var b []byte
	one := make([]byte, 1)
	for {
		if l := mqttPacketLen(b); l > 0 {
			rest := make([]byte, l-len(b))
			if _, err := io.ReadFull(r, rest); err != nil {
				t.Fatalf("read packet body: %v", err)
			}
			return append(b, rest...)
		}
		if _, err := io.ReadFull(r, one); err != nil {
			t.Fatalf("read packet: %v", err)
		}
		b = append(b, one[0])
	}
}

type muxFixture struct {
	l      Listener
	cliTLS *tls.Config
}

func newMuxFixture(t *testing.T, so QUICStreamOptions) *muxFixture {
	t.Helper()
	srvTLS, cliTLS := serverTLS(t, t.TempDir())
	l, err := Listen("quic://127.0.0.1:0", ListenOptions{TLSConfig: srvTLS, QUIC: QUICOptions{
		NextProtos: []string{ALPNMQTTNext, ALPN}, Streams: so,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	cliTLS = cliTLS.Clone()
	cliTLS.NextProtos = []string{ALPNMQTTNext}
	return &muxFixture{l: l, cliTLS: cliTLS}
}

// dial connects a raw client and sends CONNECT on the control stream; it
// returns the client connection, its control stream and the server conn.
func (f *muxFixture) dial(t *testing.T, cfg *quic.Config) (*quic.Conn, *quic.Stream, net.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := quic.DialAddr(ctx, f.l.Addr().String(), f.cliTLS, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.CloseWithError(0, "") })
	ctl, err := conn.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.Write(v5Connect); err != nil {
		t.Fatal(err)
	}
	sc, err := f.l.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })
	_ = sc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if pk := readMQTT(t, sc); pk[0] != 0x10 {
		t.Fatalf("first packet 0x%02x, want CONNECT", pk[0])
	}
	return conn, ctl, sc
}

// TestQUICMuxDataStreams: PUBLISH on a unidirectional data stream (with a
// flow header) and on a bidirectional one reach the session; the PUBACK of
// the bidirectional one goes back on that stream, the other on the
// control stream.
func TestQUICMuxDataStreams(t *testing.T) {
	f := newMuxFixture(t, QUICStreamOptions{MaxDataStreams: 4})
	conn, ctl, sc := f.dial(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	uni, err := conn.OpenUniStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hdr := appendFlowHeader(nil, flowTypeClientData, 2, 300, 0)
	if _, err := uni.Write(append(hdr, publishQoS1("a", 1, "uni")...)); err != nil {
		t.Fatal(err)
	}
	bi, err := conn.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bi.Write(publishQoS1("b", 2, "bidi")); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint16{}
	for range 2 {
		pk := readMQTT(t, sc)
		p, ok := parsePublish(pk, true)
		if !ok || pk[0]>>4 != 3 {
			t.Fatalf("session read 0x%02x, want PUBLISH", pk[0])
		}
		got[p.topic] = p.id
	}
	if got["a"] != 1 || got["b"] != 2 {
		t.Fatalf("session got %v, want a:1 b:2", got)
	}
	// The engine answers both in one write.
	if _, err := sc.Write(append(mqttPacket(0x40, 0, 1), mqttPacket(0x40, 0, 2)...)); err != nil {
		t.Fatal(err)
	}
	_ = bi.SetReadDeadline(time.Now().Add(5 * time.Second))
	if pk := readMQTT(t, bi); pk[0] != 0x40 || pk[3] != 2 {
		t.Fatalf("bidirectional data stream got % x, want PUBACK 2", pk)
	}
	_ = ctl.SetReadDeadline(time.Now().Add(5 * time.Second))
	if pk := readMQTT(t, ctl); pk[0] != 0x40 || pk[3] != 1 {
		t.Fatalf("control stream got % x, want PUBACK 1", pk)
	}
}

// TestQUICMuxStreamLimit: a data stream past MaxDataStreams is refused
// with StreamCodeFlowRefused; the connection and its other streams go on.
func TestQUICMuxStreamLimit(t *testing.T) {
	f := newMuxFixture(t, QUICStreamOptions{MaxDataStreams: 1})
	conn, _, sc := f.dial(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := conn.OpenUniStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Write(publishQoS1("a", 1, "x")); err != nil {
		t.Fatal(err)
	}
	if pk := readMQTT(t, sc); pk[0]>>4 != 3 {
		t.Fatalf("session read 0x%02x, want PUBLISH", pk[0])
	}
	second, err := conn.OpenUniStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var serr *quic.StreamError
	for i := 0; i < 100; i++ { // until STOP_SENDING arrives
		if _, err = second.Write([]byte{0x30, 3, 0, 1, 'b'}); err != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !errors.As(err, &serr) || serr.ErrorCode != StreamCodeFlowRefused {
		t.Fatalf("write past the limit: %v, want stream error 0x%X", err, StreamCodeFlowRefused)
	}
	// The first stream still works.
	if _, err := first.Write(publishQoS1("a", 2, "y")); err != nil {
		t.Fatal(err)
	}
	if pk := readMQTT(t, sc); pk[0]>>4 != 3 {
		t.Fatalf("session read 0x%02x, want PUBLISH", pk[0])
	}
}

// TestQUICMuxDatagramAndPerTopic: a QoS 0 PUBLISH datagram reaches the
// session and is counted; with DeliveryPerTopic the server's PUBLISH goes
// on a server-opened stream with a server flow header (ALPN MQTT-next).
func TestQUICMuxDatagramAndPerTopic(t *testing.T) {
	cnt := &QUICStreamCounters{}
	f := newMuxFixture(t, QUICStreamOptions{MaxDataStreams: 4, Datagrams: true, Delivery: DeliveryPerTopic, Counters: cnt})
	conn, _, sc := f.dial(t, &quic.Config{EnableDatagrams: true})
	dg := mqttPacket(0x30, append([]byte{0, 1, 'd'}, "dgram"...)...)
	if err := conn.SendDatagram(dg); err != nil {
		t.Fatal(err)
	}
	if pk := readMQTT(t, sc); string(pk) != string(dg) {
		t.Fatalf("session read % x, want the datagram % x", pk, dg)
	}
	if cnt.DatagramsIn.Load() != 1 {
		t.Fatalf("DatagramsIn = %d, want 1", cnt.DatagramsIn.Load())
	}
	// The engine delivers on topic "t": per-topic stream.
	pub := mqttPacket(0x30, append([]byte{0, 1, 't', 0}, "hi"...)...)
	if _, err := sc.Write(pub); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := conn.AcceptStream(ctx)
	if err != nil {
		t.Fatalf("no server-opened stream: %v", err)
	}
	_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
	head := make([]byte, 4)
	if _, err := io.ReadFull(s, head); err != nil {
		t.Fatal(err)
	}
	h, n, err := parseFlowHeader(head)
	if err != nil || h.typ != flowTypeServerData || h.id&1 != 1 || n != 4 {
		t.Fatalf("server flow header % x: %+v %v", head, h, err)
	}
	if pk := readMQTT(t, s); string(pk) != string(pub) {
		t.Fatalf("server stream got % x, want % x", pk, pub)
	}
}

// TestQUICSingleStreamRefusesExtraStream: on a single-stream listener a
// second stream closes the connection with QUICCodeStreamLimit and a reason
// naming the limit, instead of leaving the client waiting.
func TestQUICSingleStreamRefusesExtraStream(t *testing.T) {
	f := newMuxFixture(t, QUICStreamOptions{})
	conn, _, _ := f.dial(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	uni, err := conn.OpenUniStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = uni.Write(publishQoS1("a", 1, "x"))
	select {
	case <-conn.Context().Done():
	case <-ctx.Done():
		t.Fatal("connection still open 10 s after a second stream on a single-stream listener")
	}
	var ae *quic.ApplicationError
	if err := context.Cause(conn.Context()); !errors.As(err, &ae) || ae.ErrorCode != QUICCodeStreamLimit || !ae.Remote {
		t.Fatalf("connection ended with %v, want remote application error %d", err, QUICCodeStreamLimit)
	}
	if want := "1 bidirectional stream"; !containsStr(ae.ErrorMessage, want) {
		t.Fatalf("reason %q does not name the limit (%q)", ae.ErrorMessage, want)
	}
}

func containsStr(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
