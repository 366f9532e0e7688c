package broker_test

// Malformed packets after CONNACK (issue 17 item 1): the 10-byte MQTT 5
// SUBSCRIBE whose filter lacks its subscription-options byte once panicked
// the decoder and took the whole broker down. Each case must end only the
// offending connection, with DISCONNECT 0x81 (malformed packet) for MQTT 5
// (section 4.13.1), while other clients go on.

import (
	"bufio"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/internal/testutil"
)

// rawConnectV5 sends an MQTT 5 CONNECT (clean start, no properties) and
// waits for a successful CONNACK.
func rawConnectV5(c net.Conn, id string) (*rawClient, error) {
	rc := &rawClient{c: c, r: bufio.NewReaderSize(c, 64<<10), w: bufio.NewWriterSize(c, 64<<10)}
	var body []byte
	body = appendStr(body, "MQTT")
	body = append(body, 5, 0x02, 0, 60, 0) // v5, clean start, keep-alive 60 s, no properties
	body = appendStr(body, id)
	rc.w.Write(append(appendVarint([]byte{0x10}, len(body)), body...))
	if err := rc.w.Flush(); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
	defer c.SetReadDeadline(time.Time{})
	typ, _, b, err := rc.read()
	if err != nil {
		return nil, fmt.Errorf("connack: %w", err)
	}
	if typ != 2 || len(b) < 2 || b[1] != 0 {
		return nil, fmt.Errorf("connack: type %d body %v", typ, b)
	}
	return rc, nil
}

func TestMalformedPacketsEndOnlyThatConnection(t *testing.T) {
	srv, schemes := startMatrixBroker(t, broker.Options{Metrics: "127.0.0.1:0"})
	cases := []struct {
		name    string
		v5      bool
		packet  []byte
		want    byte // DISCONNECT reason code expected (MQTT 5), 0 for none
		comment string
	}{
		{"v5 SUBSCRIBE filter without options byte", true,
			[]byte{0x82, 0x08, 0x00, 0x01, 0x00, 0x00, 0x03, 'a', '/', 'b'}, 0x81, "the issue's 10 bytes"},
		{"v5 SUBSCRIBE property length past the end", true,
			[]byte{0x82, 0x04, 0x00, 0x01, 0x7f, 0x00}, 0x81, "properties claim 127 bytes"},
		{"v5 PUBLISH property length past the end", true,
			[]byte{0x30, 0x05, 0x00, 0x01, 't', 0x40, 0x00}, 0x81, "properties claim 64 bytes"},
		{"v5 PUBACK with truncated properties", true,
			[]byte{0x40, 0x04, 0x00, 0x01, 0x00, 0x09}, 0x81, "a reason code, then 9 bytes of properties that are not there"},
		{"v3.1.1 SUBSCRIBE filter without QoS byte", false,
			[]byte{0x82, 0x07, 0x00, 0x01, 0x00, 0x03, 'a', '/', 'b'}, 0, "3.1.1 has no DISCONNECT from the server"},
		{"v3.1.1 UNSUBSCRIBE with a string past the end", false,
			[]byte{0xa2, 0x04, 0x00, 0x01, 0x00, 0x09}, 0, ""},
	}
	for _, scheme := range []string{"mqtt", "ws", "quic"} {
		if !slices.Contains(schemes, scheme) {
			t.Fatalf("matrix broker lacks %s", scheme)
		}
		t.Run(scheme, func(t *testing.T) {
			u := brokertest.Endpoint(t, srv, scheme)
			probe := newHealthProbe(t, srv, u, "mal-"+scheme)
			for i, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					c := dial(t, srv, u)
					defer c.Close()
					id := fmt.Sprintf("mal-%s-%d", scheme, i)
					var rc *rawClient
					var err error
					if tc.v5 {
						rc, err = rawConnectV5(c, id)
					} else {
						rc, err = rawConnect(c, id)
					}
					if err != nil {
						t.Fatal(err)
					}
					_ = c.SetWriteDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
					if _, err := c.Write(tc.packet); err != nil {
						t.Fatalf("write: %v", err)
					}
					_ = c.SetReadDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
					typ, _, body, err := rc.read()
					if tc.want != 0 {
						if err != nil {
							t.Fatalf("want DISCONNECT 0x%02x, connection ended: %v", tc.want, err)
						}
						if typ != 14 || len(body) < 1 || body[0] != tc.want {
							t.Fatalf("want DISCONNECT 0x%02x, got packet type %d body %x", tc.want, typ, body)
						}
					} else if err == nil {
						t.Fatalf("want the connection closed, got packet type %d body %x", typ, body)
					}
					expectClosed(t, c, 10*time.Second, tc.name)
					probe.check(t, "after "+tc.name)
				})
			}
		})
	}
	if n := metricValue(scrape(t, srv), "iotq_broker_client_panics_total"); n != 0 {
		t.Fatalf("iotq_broker_client_panics_total = %v: a malformed packet reached a panic (recovered, but the decoder must reject it)", n)
	}
}

// TestWebSocketMessageOfReadBufferSize: WebSocket messages that end at,
// just before and just after the engine's 256-byte read buffer. A reader
// that returns (0, nil) at a message's end (io.Reader allows it; mochi's
// own WebSocket listener does) made the engine close the connection; iotq's
// transport never returns it, and mqttcore patch 21 retries such reads
// (upstream's TestServerEstablishConnectionBadPacket fails without it).
// After each message a PINGREQ must still get its PINGRESP.
func TestWebSocketMessageOfReadBufferSize(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{Listen: []string{"ws://127.0.0.1:0/mqtt"}})
	u := brokertest.Endpoint(t, srv, "ws")
	for _, total := range []int{255, 256, 257, 512} {
		t.Run(fmt.Sprint(total), func(t *testing.T) {
			c := dial(t, srv, u)
			defer c.Close()
			rc, err := rawConnect(c, fmt.Sprintf("ws-%d", total))
			if err != nil {
				t.Fatal(err)
			}
			// QoS 0 PUBLISH: 1 + 2 (remaining length) + 2 + topic + payload.
			topic := "ws/size"
			payload := make([]byte, total-3-2-len(topic))
			pkt := publishPacket(topic, payload)
			if len(pkt) != total {
				t.Fatalf("built a %d-byte packet, want %d", len(pkt), total)
			}
			if _, err := c.Write(pkt); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Write([]byte{0xc0, 0}); err != nil { // PINGREQ, its own message
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(testutil.Scale(10 * time.Second)))
			typ, _, _, err := rc.read()
			if err != nil || typ != 13 {
				t.Fatalf("after a %d-byte WebSocket message: want PINGRESP, got type %d, %v", total, typ, err)
			}
		})
	}
}
