package mqtt

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/client/internal/core"
)

// fakeBroker is a scripted MQTT peer on loopback: it accepts one
// connection, answers CONNECT with CONNACK and then lets the test decide
// what happens to each packet, so receipt semantics can be checked at the
// packet level.
type fakeBroker struct {
	l    net.Listener
	conn net.Conn
	r    *bufio.Reader
	v5   bool
}

func startFake(t *testing.T) *fakeBroker {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &fakeBroker{l: l}
}

func (f *fakeBroker) url() string { return "mqtt://" + f.l.Addr().String() }

// readPacket reads one MQTT packet: first byte and body.
func (f *fakeBroker) readPacket() (byte, []byte, error) {
	h, err := f.r.ReadByte()
	if err != nil {
		return 0, nil, err
	}
	n, mul := 0, 1
	for i := 0; i < 4; i++ {
		b, err := f.r.ReadByte()
		if err != nil {
			return 0, nil, err
		}
		n += int(b&0x7f) * mul
		mul *= 128
		if b&0x80 == 0 {
			break
		}
	}
	body := make([]byte, n)
	_, err = io.ReadFull(f.r, body)
	return h, body, err
}

// accept takes the client connection and completes the CONNECT exchange.
func (f *fakeBroker) accept(t *testing.T) {
	c, err := f.l.Accept()
	if err != nil {
		t.Error(err)
		return
	}
	f.conn, f.r = c, bufio.NewReader(c)
	h, body, err := f.readPacket()
	if err != nil || h>>4 != 1 || len(body) < 7 {
		t.Errorf("want CONNECT, got %x %v", h, err)
		return
	}
	f.v5 = body[6] == 5
	if f.v5 {
		_, err = c.Write([]byte{0x20, 3, 0, 0, 0})
	} else {
		_, err = c.Write([]byte{0x20, 2, 0, 0})
	}
	if err != nil {
		t.Error(err)
	}
}

// expect reads the next packet and checks its type; it returns the packet
// identifier of a PUBLISH (QoS > 0), PUBREL or similar.
func (f *fakeBroker) expect(typ byte) (uint16, error) {
	h, body, err := f.readPacket()
	for err == nil && h>>4 == 12 { // PINGREQ: answer and read on
		if _, err = f.conn.Write([]byte{0xd0, 0}); err == nil {
			h, body, err = f.readPacket()
		}
	}
	if err != nil {
		return 0, err
	}
	if h>>4 != typ {
		return 0, fmt.Errorf("got packet type %d, want %d", h>>4, typ)
	}
	if typ == 3 { // PUBLISH: topic, then packet id
		tl := int(body[0])<<8 | int(body[1])
		return uint16(body[2+tl])<<8 | uint16(body[3+tl]), nil
	}
	return uint16(body[0])<<8 | uint16(body[1]), nil
}

func (f *fakeBroker) send(typ byte, id uint16) error {
	flags := byte(0)
	if typ == 6 {
		flags = 2
	}
	_, err := f.conn.Write([]byte{typ<<4 | flags, 2, byte(id >> 8), byte(id)})
	return err
}

func pendingFor(t *testing.T, r *core.Receipt, d time.Duration) {
	t.Helper()
	select {
	case <-r.Done():
		t.Fatalf("receipt completed before the acknowledgement: err %v", r.Err())
	case <-time.After(d):
	}
	if !errors.Is(r.Err(), core.ErrPending) {
		t.Fatalf("pending receipt Err = %v", r.Err())
	}
}

func waitReceipt(t *testing.T, r *core.Receipt) error {
	t.Helper()
	select {
	case <-r.Done():
		return r.Err()
	case <-time.After(5 * time.Second):
		t.Fatal("receipt not completed")
		return nil
	}
}

// TestReceiptWaitsForAck: a QoS 1 receipt completes only after PUBACK, a
// QoS 2 receipt only after PUBCOMP (not PUBREC), with the time of the ack.
func TestReceiptWaitsForAck(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			f := startFake(t)
			go f.accept(t)
			c := dialT(t, f.url(), core.Options{ProtocolVersion: p.v})
			ctx := context.Background()

			r1, err := c.Publish(ctx, "a/b", []byte("x"), core.PublishOptions{QoS: 1})
			if err != nil {
				t.Fatal(err)
			}
			id, err := f.expect(3)
			if err != nil {
				t.Fatal(err)
			}
			pendingFor(t, r1, 150*time.Millisecond)
			ackAt := time.Now()
			if err := f.send(4, id); err != nil {
				t.Fatal(err)
			}
			if err := waitReceipt(t, r1); err != nil {
				t.Fatalf("QoS 1 receipt: %v", err)
			}
			if at, _ := r1.Accepted(); at.Before(ackAt) {
				t.Fatalf("accepted %v before PUBACK was sent %v", at, ackAt)
			}

			r2, err := c.Publish(ctx, "a/b", []byte("y"), core.PublishOptions{QoS: 2})
			if err != nil {
				t.Fatal(err)
			}
			id, err = f.expect(3)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.send(5, id); err != nil { // PUBREC
				t.Fatal(err)
			}
			if _, err := f.expect(6); err != nil { // PUBREL
				t.Fatal(err)
			}
			pendingFor(t, r2, 100*time.Millisecond)
			if err := f.send(7, id); err != nil { // PUBCOMP
				t.Fatal(err)
			}
			if err := waitReceipt(t, r2); err != nil {
				t.Fatalf("QoS 2 receipt: %v", err)
			}
		})
	}
}

// TestReceiptFailsWhenBrokerCloses: a QoS 1 publish whose broker closes the
// connection before PUBACK fails with ErrConnectionLost; later publishes
// fail at once.
func TestReceiptFailsWhenBrokerCloses(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			f := startFake(t)
			go f.accept(t)
			c := dialT(t, f.url(), core.Options{ProtocolVersion: p.v})
			ctx := context.Background()
			r, err := c.Publish(ctx, "a/b", []byte("x"), core.PublishOptions{QoS: 1})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.expect(3); err != nil {
				t.Fatal(err)
			}
			f.conn.Close()
			if err := waitReceipt(t, r); !errors.Is(err, core.ErrConnectionLost) {
				t.Fatalf("receipt after broker closed: %v, want ErrConnectionLost", err)
			}
			<-c.Done()
			if _, err := c.Publish(ctx, "a/b", []byte("x"), core.PublishOptions{QoS: 1}); !errors.Is(err, core.ErrConnectionLost) {
				t.Fatalf("publish after loss: %v", err)
			}
		})
	}
}

// TestQoS0ReceiptOnHandOver: QoS 0 receipts complete without any answer
// from the broker.
func TestQoS0ReceiptOnHandOver(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			f := startFake(t)
			go f.accept(t)
			c := dialT(t, f.url(), core.Options{ProtocolVersion: p.v})
			r, err := c.Publish(context.Background(), "a/b", []byte("x"), core.PublishOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := waitReceipt(t, r); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestEarlyPublishBeforeConnack: with Options.Early the PUBLISH follows
// CONNECT before the broker answered: this fake broker reads both packets
// before it sends CONNACK (a client that waited for CONNACK would hang).
func TestEarlyPublishBeforeConnack(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			f := startFake(t)
			got := make(chan string, 1)
			go func() {
				c, err := f.l.Accept()
				if err != nil {
					t.Error(err)
					return
				}
				f.conn, f.r = c, bufio.NewReader(c)
				h, body, err := f.readPacket()
				if err != nil || h>>4 != 1 {
					t.Errorf("want CONNECT: %x %v", h, err)
					return
				}
				v5 := body[6] == 5
				h, body, err = f.readPacket()
				if err != nil || h != 0x30 {
					t.Errorf("want a QoS 0 PUBLISH before CONNACK: %x %v", h, err)
					return
				}
				tl := int(body[0])<<8 | int(body[1])
				rest := body[2+tl:]
				if v5 {
					rest = rest[1:] // property length 0
				}
				got <- string(body[2:2+tl]) + " " + string(rest)
				if v5 {
					c.Write([]byte{0x20, 3, 0, 0, 0})
				} else {
					c.Write([]byte{0x20, 2, 0, 0})
				}
			}()
			c := dialT(t, f.url(), core.Options{ProtocolVersion: p.v, Early: &core.EarlyMessage{Topic: "early/t", Payload: []byte("first")}})
			select {
			case s := <-got:
				if s != "early/t first" {
					t.Fatalf("early message %q", s)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no early PUBLISH")
			}
			info := c.ConnectionInfo()
			if info.EarlySent.IsZero() || info.EarlySent.After(info.Connack) {
				t.Fatalf("EarlySent %v, CONNACK %v", info.EarlySent, info.Connack)
			}
		})
	}
}

// TestEarlyQoS1ReceiptOnPuback: a QoS 1 early PUBLISH leaves with CONNECT
// carrying core.EarlyPacketID; its receipt stays pending after CONNACK
// and completes on its PUBACK (which the MQTT library never sees: a later
// publish of the library and its own PUBACK still work). An MQTT 5 PUBACK
// with a failure reason code fails the receipt.
func TestEarlyQoS1ReceiptOnPuback(t *testing.T) {
	for _, p := range protocols {
		for _, refuse := range []bool{false, true} {
			if refuse && p.v != 5 {
				continue
			}
			t.Run(fmt.Sprintf("%s refuse=%v", p.name, refuse), func(t *testing.T) {
				f := startFake(t)
				step := make(chan struct{})
				errc := make(chan error, 1)
				go func() {
					errc <- func() error {
						c, err := f.l.Accept()
						if err != nil {
							return err
						}
						f.conn, f.r = c, bufio.NewReader(c)
						h, body, err := f.readPacket()
						if err != nil || h>>4 != 1 {
							return fmt.Errorf("want CONNECT: %x %v", h, err)
						}
						f.v5 = body[6] == 5
						h, body, err = f.readPacket()
						if err != nil || h != 0x32 {
							return fmt.Errorf("want a QoS 1 PUBLISH before CONNACK: %x %v", h, err)
						}
						tl := int(body[0])<<8 | int(body[1])
						if id := int(body[2+tl])<<8 | int(body[3+tl]); id != core.EarlyPacketID {
							return fmt.Errorf("early packet id %d, want %d", id, core.EarlyPacketID)
						}
						if f.v5 {
							c.Write([]byte{0x20, 3, 0, 0, 0})
						} else {
							c.Write([]byte{0x20, 2, 0, 0})
						}
						<-step // the test checked that the receipt is still pending
						switch {
						case refuse:
							c.Write([]byte{0x40, 3, 0xff, 0xff, 0x87}) // not authorized
						case f.v5:
							c.Write([]byte{0x40, 4, 0xff, 0xff, 0, 0}) // success, empty properties
						default:
							f.send(4, core.EarlyPacketID)
						}
						id, err := f.expect(3) // the library's own publish
						if err != nil {
							return err
						}
						return f.send(4, id)
					}()
				}()
				m := &core.EarlyMessage{Topic: "early/q1", Payload: []byte("first"), QoS: 1}
				c := dialT(t, f.url(), core.Options{ProtocolVersion: p.v, Early: m})
				pendingFor(t, m.Receipt(), 200*time.Millisecond)
				before := time.Now()
				close(step)
				err := waitReceipt(t, m.Receipt())
				if refuse {
					if err == nil || !strings.Contains(err.Error(), "0x87") {
						t.Fatalf("refused early publish: receipt error %v", err)
					}
				} else if at, ok := m.Receipt().Accepted(); err != nil || !ok || at.Before(before) {
					t.Fatalf("early receipt: %v, accepted at %v (PUBACK sent after %v)", err, at, before)
				}
				r, err := c.Publish(context.Background(), "later", []byte("x"), core.PublishOptions{QoS: 1})
				if err != nil {
					t.Fatal(err)
				}
				if err := waitReceipt(t, r); err != nil {
					t.Fatalf("the library's publish after the early one: %v", err)
				}
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
				if info := c.ConnectionInfo(); info.EarlySent.IsZero() || info.EarlySent.After(info.Connack) {
					t.Fatalf("EarlySent %v, CONNACK %v", info.EarlySent, info.Connack)
				}
			})
		}
	}
}

// TestEarlyReceiptFailsWithoutConnection: refused options and a dial that
// fails complete the early receipt with the error.
func TestEarlyReceiptFailsWithoutConnection(t *testing.T) {
	m := &core.EarlyMessage{Topic: "e", QoS: 2}
	if _, err := dialRaw(context.Background(), "mqtt://127.0.0.1:1", core.Options{Early: m}); err == nil {
		t.Fatal("QoS 2 early message accepted")
	}
	if err := waitReceipt(t, m.Receipt()); err == nil || !strings.Contains(err.Error(), "Early.QoS 2") {
		t.Fatalf("receipt error %v", err)
	}
	f := startFake(t)
	addr := f.url()
	f.l.Close()
	m = &core.EarlyMessage{Topic: "e", QoS: 1}
	if _, err := dialRaw(context.Background(), addr, core.Options{Early: m, ConnectTimeout: 5 * time.Second}); err == nil {
		t.Fatal("dial to a closed port succeeded")
	}
	if err := waitReceipt(t, m.Receipt()); err == nil {
		t.Fatal("early receipt accepted without a connection")
	}
}
