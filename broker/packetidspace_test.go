package broker_test

import (
	"net"
	"strings"
	"testing"
	"time"

	pahov3 "github.com/eclipse/paho.mqtt.golang"
	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/internal/testutil"
)

// The client's and the server's packet identifiers are separate spaces:
// "It is possible for a Client to send a PUBLISH packet with Packet
// Identifier 0x1234 and then receive a different PUBLISH packet with
// Packet Identifier 0x1234 from its Server before it receives a PUBREC"
// (MQTT 5.0 section 2.2.1; 3.1.1 section 2.3.1). These tests run a QoS 2
// exchange each way under one identifier at the same time.

// TestOverlappingQoS2ExchangesBothComplete: the server's QoS 2 message and
// the client's, under the same identifier, each go through PUBREC, PUBREL
// and PUBCOMP; after a reconnect the server resends its PUBREL, and never
// the PUBLISH it already had a PUBREC for [MQTT-4.3.3-5] (3.1.1: "MUST NOT
// re-send the PUBLISH once it has sent the corresponding PUBREL").
func TestOverlappingQoS2ExchangesBothComplete(t *testing.T) {
	for _, store := range []string{broker.StoreBolt, broker.StoreNone} {
		t.Run("store "+store, func(t *testing.T) {
			o := overlapping(t, broker.Options{StateDir: t.TempDir(), Store: store})
			id := o.id
			o.s.w.Write([]byte{0x50, 2, byte(id >> 8), byte(id)}) // PUBREC for "hello"
			flushOrFail(t, o.s)
			expectAck(t, o.s, 6, id)                              // PUBREL
			o.s.w.Write([]byte{0x62, 2, byte(id >> 8), byte(id)}) // PUBREL for the client's own
			flushOrFail(t, o.s)
			expectAck(t, o.s, 7, id) // PUBCOMP

			s2 := o.reconnect(t)
			_ = s2.c.SetReadDeadline(time.Now().Add(testutil.Scale(5 * time.Second)))
			for {
				typ, flags, body, err := s2.read()
				if err != nil {
					t.Fatalf("waiting for the PUBREL of \"hello\" after the reconnect: %v", err)
				}
				if typ == 3 {
					_, _, _, payload, _ := parsePublish(flags, body)
					t.Fatalf("the server resent PUBLISH %q after the client's PUBREC and its own PUBREL", payload)
				}
				if typ == 6 && len(body) >= 2 && uint16(body[0])<<8|uint16(body[1]) == id {
					break
				}
			}
			s2.w.Write([]byte{0x70, 2, byte(id >> 8), byte(id)}) // PUBCOMP
			flushOrFail(t, s2)
			// Nothing more of "hello" after its PUBCOMP: a marker published
			// now arrives first.
			wait(t, o.pub.Publish("to-s", 1, false, "marker"), "publish marker")
			for {
				typ, flags, body, err := s2.read()
				if err != nil {
					t.Fatalf("waiting for the marker: %v", err)
				}
				if typ == 6 {
					t.Fatalf("PUBREL % x again after its PUBCOMP", body)
				}
				if typ == 3 {
					_, _, _, payload, _ := parsePublish(flags, body)
					if string(payload) == "marker" {
						return
					}
					t.Fatalf("got PUBLISH %q again before the marker", payload)
				}
			}
		})
	}
}

// TestOverlappingQoS2SurvivesRestart: with the store on, the server's
// unacknowledged QoS 2 message and the client's open QoS 2 exchange under
// the same identifier are both kept across a restart: neither record may
// take the other's place in the store.
func TestOverlappingQoS2SurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	o := overlapping(t, broker.Options{StateDir: dir, Store: broker.StoreBolt})
	_ = o.s.c.Close()
	if err := o.srv.Close(); err != nil {
		t.Fatal(err)
	}
	srv2 := brokertest.Start(t, broker.Options{StateDir: dir, Store: broker.StoreBolt})
	s := resumeSession(t, strings.TrimPrefix(brokertest.Endpoint(t, srv2, "mqtt"), "mqtt://"), o.clientID)
	_ = s.c.SetReadDeadline(time.Now().Add(testutil.Scale(5 * time.Second)))
	for {
		typ, flags, body, err := s.read()
		if err != nil {
			t.Fatalf("\"hello\" was not redelivered after the restart: %v", err)
		}
		if typ == 3 {
			if _, qos, id, payload, _ := parsePublish(flags, body); string(payload) == "hello" {
				if qos != 2 || id != o.id || flags&0x08 == 0 {
					t.Fatalf("redelivered \"hello\" with QoS %d, identifier %d, flags %#x; want QoS 2, identifier %d, DUP", qos, id, flags, o.id)
				}
				return
			}
		}
	}
}

type overlap struct {
	srv      *broker.Server
	pub      pahov3.Client
	s        *rawClient
	id       uint16 // the identifier both exchanges use
	clientID string
	addr     string
}

// overlapping starts a broker with opts and a raw MQTT 3.1.1 client with a
// persistent session subscribed to "to-s" at QoS 2. A second client
// publishes "hello" to it at QoS 2; once it arrives, unacknowledged, the
// raw client publishes its own QoS 2 message under the same identifier and
// gets its PUBREC.
func overlapping(t *testing.T, opts broker.Options) *overlap {
	t.Helper()
	o := &overlap{srv: brokertest.Start(t, opts), clientID: "both-ways"}
	u := brokertest.Endpoint(t, o.srv, "mqtt")
	o.addr = strings.TrimPrefix(u, "mqtt://")
	c, err := net.Dial("tcp", o.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if o.s, err = rawConnectSession(c, o.clientID, false); err != nil {
		t.Fatal(err)
	}
	if err := o.s.subscribe("to-s", 2); err != nil {
		t.Fatal(err)
	}
	o.pub = v3Client(t, o.srv, u, "pub", nil)
	wait(t, o.pub.Publish("to-s", 2, false, "hello"), "publish")
	_ = c.SetReadDeadline(time.Now().Add(testutil.Scale(5 * time.Second)))
	for {
		typ, flags, body, err := o.s.read()
		if err != nil {
			t.Fatal(err)
		}
		if typ == 3 {
			var qos byte
			if _, qos, o.id, _, err = parsePublish(flags, body); err != nil || qos != 2 {
				t.Fatalf("delivery of \"hello\": QoS %d, %v", qos, err)
			}
			break
		}
	}
	o.s.publish("elsewhere", 2, o.id, []byte("mine"))
	flushOrFail(t, o.s)
	expectAck(t, o.s, 5, o.id) // PUBREC
	return o
}

// reconnect closes the raw client's connection and connects it again,
// resuming its session.
func (o *overlap) reconnect(t *testing.T) *rawClient {
	t.Helper()
	_ = o.s.c.Close()
	return resumeSession(t, o.addr, o.clientID)
}

// resumeSession connects a raw MQTT 3.1.1 client to addr as clientID with
// a persistent session.
func resumeSession(t *testing.T, addr, clientID string) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	s, err := rawConnectSession(c, clientID, false)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func flushOrFail(t *testing.T, s *rawClient) {
	t.Helper()
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
}
