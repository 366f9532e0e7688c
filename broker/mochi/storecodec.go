package mochi

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/iotq/iotq/internal/mqttcore/hooks/storage"
	"github.com/iotq/iotq/internal/mqttcore/packets"
)

// The in-flight store (inflight.log) holds one record per queued or
// in-flight QoS 1/2 message. Records were JSON (mochi's
// storage.Message.MarshalBinary) until the binary encoding below replaced
// it: JSON was 8 % of the broker's CPU with the store on, and twice the
// bytes. Records are read in either format, so a state directory written
// by an older broker still loads; new records are binary.
//
// Binary record: the byte inflightRecordV2, then the fields of
// storage.Message in a fixed order: strings and byte slices as a uvarint
// length and the bytes, integers as (u)varints, booleans as one byte; last
// the message's Seq (its order in the session). A V1 record is the same
// without Seq (read as 0: such messages come first, by packet id).
const (
	inflightRecordV1 = 0x01
	inflightRecordV2 = 0x02
)

var errShortRecord = errors.New("record ends early")

// encodeInflight appends the binary record of m to dst.
func encodeInflight(dst []byte, m *storage.Message) []byte {
	dst = append(dst, inflightRecordV2)
	for _, s := range [...]string{m.T, m.ID, m.Client, m.Origin, m.TopicName} {
		dst = appendString(dst, s)
	}
	dst = appendBytes(dst, m.Payload)
	fh := m.FixedHeader
	dst = binary.AppendUvarint(dst, uint64(fh.Remaining))
	dst = append(dst, fh.Type, fh.Qos, boolByte(fh.Dup)|boolByte(fh.Retain)<<1)
	dst = binary.AppendVarint(dst, m.Created)
	dst = binary.AppendVarint(dst, m.Sent)
	dst = binary.AppendUvarint(dst, uint64(m.PacketID))
	p := &m.Properties
	dst = appendBytes(dst, p.CorrelationData)
	dst = binary.AppendUvarint(dst, uint64(len(p.SubscriptionIdentifier)))
	for _, id := range p.SubscriptionIdentifier {
		dst = binary.AppendVarint(dst, int64(id))
	}
	dst = binary.AppendUvarint(dst, uint64(len(p.User)))
	for _, u := range p.User {
		dst = appendString(dst, u.Key)
		dst = appendString(dst, u.Val)
	}
	dst = appendString(dst, p.ContentType)
	dst = appendString(dst, p.ResponseTopic)
	dst = binary.AppendUvarint(dst, uint64(p.MessageExpiryInterval))
	dst = binary.AppendUvarint(dst, uint64(p.TopicAlias))
	dst = append(dst, p.PayloadFormat, boolByte(p.PayloadFormatFlag))
	return binary.AppendUvarint(dst, m.Seq)
}

// decodeInflight reads a record in either format: binary, or the JSON
// that earlier versions wrote.
func decodeInflight(b []byte, m *storage.Message) error {
	if len(b) > 0 && b[0] == '{' {
		if err := m.UnmarshalBinary(b); err != nil {
			return fmt.Errorf("JSON record: %w", err)
		}
		return nil
	}
	if len(b) == 0 || (b[0] != inflightRecordV1 && b[0] != inflightRecordV2) {
		return fmt.Errorf("unknown record format (first byte %#x)", firstByte(b))
	}
	version := b[0]
	d := recordDecoder{b: b[1:]}
	*m = storage.Message{}
	for _, s := range [...]*string{&m.T, &m.ID, &m.Client, &m.Origin, &m.TopicName} {
		*s = d.string()
	}
	m.Payload = d.bytes()
	m.FixedHeader.Remaining = int(d.uvarint())
	m.FixedHeader.Type, m.FixedHeader.Qos = d.byte(), d.byte()
	flags := d.byte()
	m.FixedHeader.Dup, m.FixedHeader.Retain = flags&1 != 0, flags&2 != 0
	m.Created = d.varint()
	m.Sent = d.varint()
	m.PacketID = uint16(d.uvarint())
	p := &m.Properties
	p.CorrelationData = d.bytes()
	if n := d.count(); n > 0 {
		p.SubscriptionIdentifier = make([]int, n)
		for i := range p.SubscriptionIdentifier {
			p.SubscriptionIdentifier[i] = int(d.varint())
		}
	}
	if n := d.count(); n > 0 {
		p.User = make([]packets.UserProperty, n)
		for i := range p.User {
			p.User[i].Key = d.string()
			p.User[i].Val = d.string()
		}
	}
	p.ContentType = d.string()
	p.ResponseTopic = d.string()
	p.MessageExpiryInterval = uint32(d.uvarint())
	p.TopicAlias = uint16(d.uvarint())
	p.PayloadFormat = d.byte()
	p.PayloadFormatFlag = d.byte() != 0
	if version >= inflightRecordV2 {
		m.Seq = d.uvarint()
	}
	if d.err != nil {
		return fmt.Errorf("binary record: %w", d.err)
	}
	if len(d.b) != 0 {
		return fmt.Errorf("binary record: %d bytes left over", len(d.b))
	}
	return nil
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

func firstByte(b []byte) byte {
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

// recordDecoder reads fields; after the first error it returns zero values
// and keeps the error.
type recordDecoder struct {
	b   []byte
	err error
}

func (d *recordDecoder) fail() {
	if d.err == nil {
		d.err = errShortRecord
	}
	d.b = nil
}

func (d *recordDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *recordDecoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *recordDecoder) byte() byte {
	if len(d.b) < 1 {
		d.fail()
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

// count reads a number of elements, each taking at least one byte.
func (d *recordDecoder) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *recordDecoder) bytes() []byte {
	n := d.count()
	if d.err != nil || n == 0 {
		return nil
	}
	v := append([]byte(nil), d.b[:n]...) // the store reuses its read buffer
	d.b = d.b[n:]
	return v
}

func (d *recordDecoder) string() string {
	n := d.count()
	if d.err != nil || n == 0 {
		return ""
	}
	v := string(d.b[:n])
	d.b = d.b[n:]
	return v
}
