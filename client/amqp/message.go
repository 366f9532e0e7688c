package amqp

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/iotq/iotq/client/internal/core"
)

// message turns a delivery into the handler's Message: the topic is the
// address the message was sent to (its to property, else the link's
// address; without the URL's prefix), then properties, message id and
// body.
func (c *client) message(d delivery) core.Message {
	topic := d.to
	var id string
	if p := d.msg.Properties; p != nil {
		if p.To != nil && *p.To != "" {
			topic = *p.To
		}
		if p.MessageID != nil {
			id = text(p.MessageID)
		}
	}
	topic = strings.TrimPrefix(topic, c.prefix)
	var props map[string]string
	if len(d.msg.ApplicationProperties) > 0 {
		props = make(map[string]string, len(d.msg.ApplicationProperties))
		for k, v := range d.msg.ApplicationProperties {
			props[k] = text(v)
		}
	}
	payload, vt := body(d.msg)
	return core.Message{Topic: topic, Payload: payload, QoS: d.qos, Received: d.at,
		Properties: props, MessageID: id, ValueType: vt}
}

// text renders a property or message id: strings as they are, other
// values as in JSON.
func text(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case goamqp.UUID:
		return v.String()
	}
	b, err := json.Marshal(jsonable(v))
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// body returns a message's payload and value type (core.Message.ValueType):
// its data sections as they are; an AMQP value that is bytes or a string
// (as Proton sends text) as it is; other values (map, list, numbers, null,
// ...) and amqp-sequence sections rendered as JSON. go-amqp gives a nil
// Value for an amqp-value null: it is rendered "null".
func body(m *goamqp.Message) ([]byte, string) {
	switch {
	case len(m.Data) == 1:
		return m.Data[0], ""
	case len(m.Data) > 1:
		var b []byte
		for _, d := range m.Data {
			b = append(b, d...)
		}
		return b, ""
	case len(m.Sequence) > 0:
		return render(m.Sequence), "sequence"
	}
	switch v := m.Value.(type) {
	case []byte:
		return v, "binary"
	case string:
		return []byte(v), "string"
	case nil: // an amqp-value null (a message has a body section: part 3 section 3.2)
		return []byte("null"), "null"
	default:
		return render(v), valueType(v)
	}
}

func render(v any) []byte {
	b, err := json.Marshal(jsonable(v))
	if err != nil {
		return []byte(fmt.Sprint(v))
	}
	return b
}

// valueType names the AMQP type of a value decoded by go-amqp.
func valueType(v any) string {
	switch v.(type) {
	case bool:
		return "boolean"
	case int8:
		return "byte"
	case int16:
		return "short"
	case int32:
		return "int"
	case int64:
		return "long"
	case uint8:
		return "ubyte"
	case uint16:
		return "ushort"
	case uint32:
		return "uint"
	case uint64:
		return "ulong"
	case float32:
		return "float"
	case float64:
		return "double"
	case goamqp.Symbol:
		return "symbol"
	case time.Time:
		return "timestamp"
	case goamqp.UUID:
		return "uuid"
	}
	switch reflect.ValueOf(v).Kind() {
	case reflect.Map:
		return "map"
	case reflect.Slice, reflect.Array:
		return "list"
	}
	return fmt.Sprintf("%T", v)
}

// jsonable converts a value decoded by go-amqp into one encoding/json
// renders: maps with keys as text (sorted by encoding/json), lists
// element by element, binary as base64 text, symbols and UUIDs as text,
// timestamps in RFC 3339, non-finite floats as text.
func jsonable(v any) any {
	switch v := v.(type) {
	case nil, bool, string, int8, int16, int32, int64, uint8, uint16, uint32, uint64:
		return v
	case float32:
		return jsonable(float64(v))
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Sprint(v)
		}
		return v
	case []byte:
		return base64.StdEncoding.EncodeToString(v)
	case goamqp.Symbol:
		return string(v)
	case goamqp.UUID:
		return v.String()
	case time.Time:
		return v.UTC().Format(time.RFC3339Nano)
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map:
		out := make(map[string]any, rv.Len())
		keys := rv.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
		for _, k := range keys {
			ks := text(k.Interface())
			out[ks] = jsonable(rv.MapIndex(k).Interface())
		}
		return out
	case reflect.Slice, reflect.Array:
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = jsonable(rv.Index(i).Interface())
		}
		return out
	}
	return fmt.Sprint(v)
}
