package broker_test

// A deliberately small MQTT 3.1.1 client for load tests: it batches writes
// and parses only what the load needs, so the load generator is cheaper
// than the broker it measures.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

type rawClient struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

func appendVarint(b []byte, n int) []byte {
	for {
		d := byte(n % 128)
		n /= 128
		if n > 0 {
			d |= 0x80
		}
		b = append(b, d)
		if n == 0 {
			return b
		}
	}
}

func appendStr(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// newRawBuffers returns the buffers of a rawClient on c.
func newRawBuffers(c net.Conn) (*bufio.Reader, *bufio.Writer) {
	return bufio.NewReaderSize(c, 64<<10), bufio.NewWriterSize(c, 64<<10)
}

// rawConnect sends CONNECT (clean session) over c and waits for CONNACK.
func rawConnect(c net.Conn, id string) (*rawClient, error) { return rawConnectSession(c, id, true) }

// rawConnectSession is rawConnect with a choice of clean session.
func rawConnectSession(c net.Conn, id string, clean bool) (*rawClient, error) {
	flags := byte(0)
	if clean {
		flags = 0x02
	}
	rc := &rawClient{c: c}
	rc.r, rc.w = newRawBuffers(c)
	var body []byte
	body = appendStr(body, "MQTT")
	body = append(body, 4, flags, 0, 120) // v3.1.1, keepalive 120 s
	body = appendStr(body, id)
	pkt := appendVarint([]byte{0x10}, len(body))
	rc.w.Write(append(pkt, body...))
	if err := rc.w.Flush(); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	typ, _, b, err := rc.read()
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		return nil, fmt.Errorf("connack: %w", err)
	}
	if typ != 2 || len(b) < 2 || b[1] != 0 {
		return nil, fmt.Errorf("connack: type %d body %v", typ, b)
	}
	return rc, nil
}

func (rc *rawClient) subscribe(topic string, qos byte) error {
	var body []byte
	body = binary.BigEndian.AppendUint16(body, 1)
	body = appendStr(body, topic)
	body = append(body, qos)
	rc.w.Write(append(appendVarint([]byte{0x82}, len(body)), body...))
	if err := rc.w.Flush(); err != nil {
		return err
	}
	_ = rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer rc.c.SetReadDeadline(time.Time{})
	for {
		typ, _, b, err := rc.read()
		if err != nil {
			return fmt.Errorf("suback: %w", err)
		}
		if typ == 9 {
			if len(b) < 3 || b[2] > 2 {
				return fmt.Errorf("suback refused: %v", b)
			}
			return nil
		}
	}
}

// publish buffers a PUBLISH; call flush to send.
func (rc *rawClient) publish(topic string, qos byte, id uint16, payload []byte) {
	n := 2 + len(topic) + len(payload)
	if qos > 0 {
		n += 2
	}
	var hdr [5]byte
	h := appendVarint(append(hdr[:0], 0x30|qos<<1), n)
	rc.w.Write(h)
	var tl [2]byte
	binary.BigEndian.PutUint16(tl[:], uint16(len(topic)))
	rc.w.Write(tl[:])
	rc.w.WriteString(topic)
	if qos > 0 {
		binary.BigEndian.PutUint16(tl[:], id)
		rc.w.Write(tl[:])
	}
	rc.w.Write(payload)
}

// ack buffers a PUBACK.
func (rc *rawClient) ack(id uint16) {
	rc.w.Write([]byte{0x40, 2, byte(id >> 8), byte(id)})
}

func (rc *rawClient) flush() error { return rc.w.Flush() }

func (rc *rawClient) disconnect() {
	rc.w.Write([]byte{0xe0, 0})
	_ = rc.w.Flush()
	_ = rc.c.Close()
}

// read returns the next packet's type, flags and body. The body is valid
// until the next read.
func (rc *rawClient) read() (typ, flags byte, body []byte, err error) {
	h, err := rc.r.ReadByte()
	if err != nil {
		return 0, 0, nil, err
	}
	n, mult := 0, 1
	for i := 0; ; i++ {
		d, err := rc.r.ReadByte()
		if err != nil {
			return 0, 0, nil, err
		}
		n += int(d&0x7f) * mult
		if d&0x80 == 0 {
			break
		}
		if i == 3 {
			return 0, 0, nil, errors.New("bad remaining length")
		}
		mult *= 128
	}
	body, err = rc.r.Peek(n)
	if err == bufio.ErrBufferFull {
		body = make([]byte, n)
		_, err = io.ReadFull(rc.r, body)
		return h >> 4, h & 0x0f, body, err
	}
	if err != nil {
		return 0, 0, nil, err
	}
	_, _ = rc.r.Discard(n)
	return h >> 4, h & 0x0f, body, nil
}

// parsePublish splits a PUBLISH body.
func parsePublish(flags byte, body []byte) (topic string, qos byte, id uint16, payload []byte, err error) {
	if len(body) < 2 {
		return "", 0, 0, nil, errors.New("short publish")
	}
	tl := int(binary.BigEndian.Uint16(body))
	if len(body) < 2+tl {
		return "", 0, 0, nil, errors.New("short topic")
	}
	topic = string(body[2 : 2+tl])
	rest := body[2+tl:]
	qos = (flags >> 1) & 3
	if qos > 0 {
		if len(rest) < 2 {
			return "", 0, 0, nil, errors.New("short packet id")
		}
		id = binary.BigEndian.Uint16(rest)
		rest = rest[2:]
	}
	return topic, qos, id, rest, nil
}
