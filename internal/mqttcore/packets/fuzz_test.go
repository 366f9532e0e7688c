// SPDX-License-Identifier: MIT

package packets

// Fuzz targets for the MQTT decoders [iotq patch 19]. Every byte a client
// sends after its CONNACK reaches DecodeBody, so no input may panic it;
// a packet that decodes must also validate and encode again without
// panicking, because the broker answers with what it decoded. Seeds are
// valid packets of every type in MQTT 3.1, 3.1.1 and 5, built by this
// package's own encoders, plus the crashers found so far (testdata/fuzz).
//
//	go test ./internal/mqttcore/packets -run '^$' -fuzz FuzzDecodeBody -fuzztime 60s

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// seedPackets returns valid packets of every type for one protocol version.
func seedPackets(v byte) []Packet {
	props := Properties{}
	if v == 5 {
		props = Properties{
			ContentType:            "text/plain",
			ResponseTopic:          "reply/to",
			CorrelationData:        []byte{1, 2, 3},
			MessageExpiryInterval:  60,
			PayloadFormat:          1,
			PayloadFormatFlag:      true,
			User:                   []UserProperty{{Key: "k", Val: "v"}},
			SubscriptionIdentifier: []int{7},
		}
	}
	name := []byte("MQTT")
	if v == 3 {
		name = []byte("MQIsdp")
	}
	connect := Packet{FixedHeader: FixedHeader{Type: Connect}, ProtocolVersion: v, Connect: ConnectParams{
		ProtocolName: name, ClientIdentifier: "dev-1", Keepalive: 30, Clean: true,
		UsernameFlag: true, Username: []byte("u"), PasswordFlag: true, Password: []byte("p"),
		WillFlag: true, WillTopic: "will/t", WillPayload: []byte("bye"), WillQos: 1,
	}}
	if v == 5 {
		connect.Properties = Properties{SessionExpiryInterval: 300, SessionExpiryIntervalFlag: true, ReceiveMaximum: 10, TopicAliasMaximum: 5, MaximumPacketSize: 1 << 16}
		connect.Connect.WillProperties = &Properties{WillDelayInterval: 5, ContentType: "c"}
	}
	return []Packet{
		connect,
		{FixedHeader: FixedHeader{Type: Connack}, ProtocolVersion: v, SessionPresent: true, Properties: Properties{ReceiveMaximum: 10, MaximumQos: 1, MaximumQosFlag: true}},
		{FixedHeader: FixedHeader{Type: Publish, Qos: 1, Retain: true}, ProtocolVersion: v, TopicName: "a/b", PacketID: 7, Payload: []byte("payload"), Properties: props},
		{FixedHeader: FixedHeader{Type: Publish}, ProtocolVersion: v, TopicName: "a/b", Payload: []byte("q0")},
		{FixedHeader: FixedHeader{Type: Puback}, ProtocolVersion: v, PacketID: 7, ReasonCode: 0x10},
		{FixedHeader: FixedHeader{Type: Pubrec}, ProtocolVersion: v, PacketID: 8},
		{FixedHeader: FixedHeader{Type: Pubrel, Qos: 1}, ProtocolVersion: v, PacketID: 8},
		{FixedHeader: FixedHeader{Type: Pubcomp}, ProtocolVersion: v, PacketID: 8},
		{FixedHeader: FixedHeader{Type: Subscribe, Qos: 1}, ProtocolVersion: v, PacketID: 9, Properties: Properties{SubscriptionIdentifier: []int{3}},
			Filters: Subscriptions{{Filter: "a/#", Qos: 1, NoLocal: true}, {Filter: "$share/g/b/+", Qos: 2}}},
		{FixedHeader: FixedHeader{Type: Suback}, ProtocolVersion: v, PacketID: 9, ReasonCodes: []byte{1, 0x80}},
		{FixedHeader: FixedHeader{Type: Unsubscribe, Qos: 1}, ProtocolVersion: v, PacketID: 10, Filters: Subscriptions{{Filter: "a/#"}, {Filter: "c"}}},
		{FixedHeader: FixedHeader{Type: Unsuback}, ProtocolVersion: v, PacketID: 10, ReasonCodes: []byte{0, 0x11}},
		{FixedHeader: FixedHeader{Type: Pingreq}, ProtocolVersion: v},
		{FixedHeader: FixedHeader{Type: Pingresp}, ProtocolVersion: v},
		{FixedHeader: FixedHeader{Type: Disconnect}, ProtocolVersion: v, ReasonCode: 0x04},
		{FixedHeader: FixedHeader{Type: Auth}, ProtocolVersion: 5, ReasonCode: 0x18, Properties: Properties{AuthenticationMethod: "m", AuthenticationData: []byte{1}}},
	}
}

// encodePacket encodes pk with its own encoder.
func encodePacket(pk *Packet, buf *bytes.Buffer) error {
	switch pk.FixedHeader.Type {
	case Connect:
		return pk.ConnectEncode(buf)
	case Connack:
		return pk.ConnackEncode(buf)
	case Publish:
		return pk.PublishEncode(buf)
	case Puback:
		return pk.PubackEncode(buf)
	case Pubrec:
		return pk.PubrecEncode(buf)
	case Pubrel:
		return pk.PubrelEncode(buf)
	case Pubcomp:
		return pk.PubcompEncode(buf)
	case Subscribe:
		return pk.SubscribeEncode(buf)
	case Suback:
		return pk.SubackEncode(buf)
	case Unsubscribe:
		return pk.UnsubscribeEncode(buf)
	case Unsuback:
		return pk.UnsubackEncode(buf)
	case Pingreq:
		return pk.PingreqEncode(buf)
	case Pingresp:
		return pk.PingrespEncode(buf)
	case Disconnect:
		return pk.DisconnectEncode(buf)
	case Auth:
		return pk.AuthEncode(buf)
	}
	return nil
}

// splitPacket returns the first byte and the body of an encoded packet.
func splitPacket(t testing.TB, b []byte) (byte, []byte) {
	t.Helper()
	remaining, n, err := DecodeLength(bytes.NewBuffer(b[1:]))
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	body := b[1+n:]
	if len(body) != remaining {
		t.Fatalf("seed: remaining length %d, body %d", remaining, len(body))
	}
	return b[0], body
}

// decodeAny is the broker's decode path for one packet: the fixed header's
// first byte, then the body as ReadPacket hands it over.
func decodeAny(version, first byte, body []byte) (Packet, error) {
	var pk Packet
	if err := pk.FixedHeader.Decode(first); err != nil {
		return pk, err
	}
	pk.FixedHeader.Remaining = len(body)
	pk.ProtocolVersion = version
	if pk.FixedHeader.Type == Connect {
		pk.ProtocolVersion = 0 // learnt from the CONNECT itself
	}
	err := pk.DecodeBody(body)
	return pk, err
}

func FuzzDecodeBody(f *testing.F) {
	for _, v := range []byte{3, 4, 5} {
		for _, pk := range seedPackets(v) {
			if pk.FixedHeader.Type == Auth && v != 5 {
				continue
			}
			var buf bytes.Buffer
			if err := encodePacket(&pk, &buf); err != nil {
				f.Fatalf("seed v%d type %d: %v", v, pk.FixedHeader.Type, err)
			}
			first, body := splitPacket(f, buf.Bytes())
			f.Add(v, first, body)
		}
	}
	f.Fuzz(func(t *testing.T, version, first byte, body []byte) {
		version = 3 + version%3
		pk, err := decodeAny(version, first, body)
		if err != nil {
			return
		}
		// What the broker does next with a decoded packet.
		switch pk.FixedHeader.Type {
		case Connect:
			pk.ConnectValidate()
		case Publish:
			pk.PublishValidate(10)
		case Subscribe:
			pk.SubscribeValidate()
		case Unsubscribe:
			pk.UnsubscribeValidate()
		case Auth:
			pk.AuthValidate()
		}
		pk.ReasonCodeValid()
		pk.FormatID()
		var buf bytes.Buffer
		_ = encodePacket(&pk, &buf)
		_ = pk.Copy(true)
	})
}

// FuzzDecodeProperties feeds MQTT 5 property blocks to the property decoder
// under every packet type's rules.
func FuzzDecodeProperties(f *testing.F) {
	for _, pk := range seedPackets(5) {
		var buf bytes.Buffer
		pk.Properties.Encode(pk.FixedHeader.Type, pk.Mods, &buf, 0)
		f.Add(pk.FixedHeader.Type, buf.Bytes())
	}
	f.Fuzz(func(t *testing.T, typ byte, b []byte) {
		var p Properties
		n, err := p.Decode(typ%16, bytes.NewBuffer(b))
		if err == nil && (n < 0 || n > len(b)) {
			t.Fatalf("Decode consumed %d of %d bytes", n, len(b))
		}
	})
}

// TestSubscribeWithoutOptionsByte is the crasher of issue 17: a v5
// SUBSCRIBE whose last filter has no subscription-options byte.
func TestSubscribeWithoutOptionsByte(t *testing.T) {
	raw := []byte{0x82, 0x08, 0x00, 0x01, 0x00, 0x00, 0x03, 'a', '/', 'b'}
	_, err := decodeAny(5, raw[0], raw[2:])
	if err == nil {
		t.Fatal("decoded a SUBSCRIBE without options byte; want a malformed-packet error")
	}
	code, ok := err.(Code)
	if !ok || code.Code != ErrMalformedPacket.Code {
		t.Fatalf("error %v; want reason code 0x81 (malformed packet)", err)
	}
}

// TestSeedsRoundTrip keeps the seeds honest: each decodes to what was encoded.
func TestSeedsRoundTrip(t *testing.T) {
	for _, v := range []byte{3, 4, 5} {
		for _, pk := range seedPackets(v) {
			if pk.FixedHeader.Type == Auth && v != 5 {
				continue
			}
			var buf bytes.Buffer
			if err := encodePacket(&pk, &buf); err != nil {
				t.Fatal(err)
			}
			first, body := splitPacket(t, buf.Bytes())
			got, err := decodeAny(v, first, body)
			if err != nil {
				t.Fatalf("v%d type %d: %v", v, pk.FixedHeader.Type, err)
			}
			if got.PacketID != pk.PacketID || got.TopicName != pk.TopicName || len(got.Filters) != len(pk.Filters) {
				t.Fatalf("v%d type %d: decoded %+v", v, pk.FixedHeader.Type, got)
			}
		}
	}
}

// TestPacketLogValueBounded: a logged packet never carries its payload or
// a long topic.
func TestPacketLogValueBounded(t *testing.T) {
	long := strings.Repeat("t/", 50000)
	pk := Packet{FixedHeader: FixedHeader{Type: Publish, Qos: 1}, PacketID: 3, TopicName: long, Payload: bytes.Repeat([]byte("x"), 1<<20)}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Warn("error processing packet", "pk", pk)
	if buf.Len() > 512 {
		t.Fatalf("log line of %d bytes for a 1 MiB packet: %.300s", buf.Len(), buf.String())
	}
	if !strings.Contains(buf.String(), "payload_bytes=1048576") || !strings.Contains(buf.String(), "pk.type=Publish") {
		t.Fatalf("log line lacks the packet's type or size: %s", buf.String())
	}
}
