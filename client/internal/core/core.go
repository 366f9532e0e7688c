package core

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/iotq/iotq/internal/mqttname"
	"github.com/iotq/iotq/transport"
)

// Sentinel errors shared by all implementations.
var (
	// ErrClosed is returned by operations on a client after Close, and
	// completes receipts that were still pending when Close was called.
	ErrClosed = errors.New("client closed")
	// ErrConnectionLost completes receipts whose connection ended before the
	// broker acknowledged the message.
	ErrConnectionLost = errors.New("connection lost before the message was acknowledged")
	// ErrPending is what Receipt.Err returns while the outcome is unknown.
	ErrPending = errors.New("publish not yet acknowledged")
)

// PublishOptions describe one publish. The zero value is QoS 0, not
// retained.
type PublishOptions struct {
	QoS    byte // 0, 1 or 2
	Retain bool
	// Properties are application properties sent with the message: AMQP
	// application-properties (string values). AMQP only so far: MQTT
	// (MQTT 5 user properties are not mapped yet) and CoAP refuse a
	// publish that sets them. Default none.
	Properties map[string]string
	// MessageID is the message's identifier: AMQP's message-id (a
	// string). MQTT and CoAP have none and refuse a publish that sets it.
	// Default none.
	MessageID string
}

// SubscribeOptions describe one subscription. The zero value is QoS 0.
type SubscribeOptions struct {
	QoS byte // maximum QoS the broker may deliver with: 0, 1 or 2
}

// Message is a message delivered to a subscription handler.
type Message struct {
	Topic    string
	Payload  []byte
	QoS      byte
	Retained bool      // delivered from the broker's retained store
	Received time.Time // taken when the client library handed the message over
	// Properties are the message's application properties (AMQP
	// application-properties, values as text); nil when it has none.
	Properties map[string]string
	// MessageID is the message's identifier as text (AMQP message-id);
	// empty when it has none.
	MessageID string
	// ValueType is empty for a payload of bytes (MQTT, CoAP, AMQP data
	// sections). For an AMQP message whose body is an AMQP value it names
	// the value's type (string, map, list, int, long, null, ...; sequence
	// for amqp-sequence sections) and Payload holds the value: a string's
	// or binary's bytes as they are, other values rendered as JSON (null as
	// "null", maps with their keys as text).
	ValueType string
}

// CheckPublishExtras refuses publish options a protocol has no place for:
// props and id tell whether it carries Properties and MessageID.
func CheckPublishExtras(protocol string, opts PublishOptions, props, id bool) error {
	switch {
	case len(opts.Properties) > 0 && !props:
		return fmt.Errorf("message properties: not supported over %s (AMQP application properties only)", protocol)
	case opts.MessageID != "" && !id:
		return fmt.Errorf("message id: %s messages carry none (AMQP only)", protocol)
	}
	return nil
}

// Handler receives messages of a subscription. Handlers of one client are
// called one at a time, in arrival order, from a goroutine owned by the
// client; a handler that blocks delays every later message and the
// acknowledgements of the client. A message that matches several filters of
// the same client is passed to each matching handler. MQTT acknowledges a
// QoS 1 or 2 message to the broker only after its handlers returned.
type Handler func(Message)

// Receipt reports when and whether a published message was accepted: the
// broker's acknowledgement for QoS 1 (PUBACK) and QoS 2 (PUBCOMP), the
// hand-over to the transport for QoS 0. Publish first, then ask whether it
// succeeded. Safe for concurrent use.
type Receipt struct {
	done     chan struct{}
	once     sync.Once
	accepted time.Time
	err      error
}

// NewReceipt returns a pending receipt and the function that completes it.
// Implementations call complete exactly when the outcome is known; later
// calls are ignored. err == nil means accepted at time at.
func NewReceipt() (r *Receipt, complete func(at time.Time, err error)) {
	r = &Receipt{done: make(chan struct{})}
	return r, func(at time.Time, err error) {
		r.once.Do(func() {
			r.accepted, r.err = at, err
			close(r.done)
		})
	}
}

// Done is closed when the outcome is known.
func (r *Receipt) Done() <-chan struct{} { return r.done }

// Wait blocks until the outcome is known or ctx ends, and returns Err (or the
// context's error).
func (r *Receipt) Wait(ctx context.Context) error {
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return fmt.Errorf("waiting for acknowledgement: %w", ctx.Err())
	}
}

// Err returns nil if the message was accepted, ErrPending while the outcome
// is unknown, and the reason otherwise.
func (r *Receipt) Err() error {
	select {
	case <-r.done:
		return r.err
	default:
		return ErrPending
	}
}

// Accepted returns the time the message was accepted; ok is false while
// pending or when the publish failed.
func (r *Receipt) Accepted() (t time.Time, ok bool) {
	select {
	case <-r.done:
		return r.accepted, r.err == nil
	default:
		return time.Time{}, false
	}
}

// ConnectionInfo are the facts of an established client connection.
type ConnectionInfo struct {
	URL            string    // the URL dialled
	Transport      string    // URL scheme: mqtt, mqtts, ws, wss, quic
	Protocol       string    // e.g. "mqtt/3.1.1", "mqtt/5"
	ClientID       string    // the client identifier in use (assigned by the broker when asked)
	DialStart      time.Time // when dialling began
	TransportReady time.Time // transport usable (TCP connected, TLS/WS/QUIC handshake done or 0-RTT ready)
	Connack        time.Time // CONNACK (or the protocol's equivalent) received
	SessionPresent bool      // the broker resumed a stored session
	EarlySent      time.Time // when Options.Early was written (zero if none)
	TLSResumed     bool      // TLS or QUIC session resumed from a ticket
	Used0RTT       bool      // QUIC early data accepted by the server
	Rejected0RTT   bool      // 0-RTT attempted, rejected, fell back to a full handshake
	// LinkAttached is when the first link was attached (AMQP: the first
	// sender or receiver; zero for MQTT).
	LinkAttached time.Time
	// FirstTransfer is when the first message was written (AMQP transfer;
	// zero for MQTT and before the first publish).
	FirstTransfer time.Time
	// QUIC holds QUIC path statistics at the time of the call; nil for other
	// transports.
	QUIC *transport.QUICStats
}

// Client is one connection to a broker behind the common API. All methods
// are safe for concurrent use.
type Client interface {
	// Publish hands a message to the client library. The error is non-nil
	// when the message could not even be handed over (client closed,
	// connection already lost, bad arguments); otherwise the Receipt tells
	// when and whether it was accepted.
	Publish(ctx context.Context, topic string, payload []byte, opts PublishOptions) (*Receipt, error)
	// Subscribe subscribes to filter and returns once the broker granted the
	// subscription (SUBACK). It fails if the broker refused it.
	Subscribe(ctx context.Context, filter string, opts SubscribeOptions, h Handler) error
	// ConnectionInfo returns the connection facts.
	ConnectionInfo() ConnectionInfo
	// Done is closed when the connection ends: lost, refused by the broker
	// later on, or closed by Close.
	Done() <-chan struct{}
	// Err says why the connection ended: nil while it is open, ErrClosed
	// after Close, another error when it was lost.
	Err() error
	// Close disconnects cleanly (DISCONNECT), fails pending receipts with
	// ErrClosed and waits for the client's goroutines. Idempotent.
	Close() error
}

// Will is the message the broker publishes when the client disappears
// without a clean disconnect.
type Will struct {
	Topic   string
	Payload []byte
	QoS     byte
	Retain  bool
}

// EarlyMessage is a message sent right behind CONNECT, in the same write
// (Options.Early). Use one EarlyMessage for one Dial.
type EarlyMessage struct {
	Topic   string
	Payload []byte
	Retain  bool
	// QoS is 0 or 1. A QoS 1 message carries a packet identifier the MQTT
	// library never hands out first (EarlyPacketID) and its Receipt
	// completes on the broker's PUBACK.
	QoS byte

	once     sync.Once
	receipt  *Receipt
	complete func(time.Time, error)
}

// EarlyPacketID is the packet identifier of a QoS 1 EarlyMessage. Both
// MQTT libraries hand out identifiers upwards from 1, so a connection
// would need 65534 other unacknowledged packets before the early PUBACK
// came back to reuse it.
const EarlyPacketID = 65535

func (m *EarlyMessage) init() {
	m.once.Do(func() { m.receipt, m.complete = NewReceipt() })
}

// Receipt returns the early message's receipt. It completes when the
// message was accepted: at QoS 1 when the broker's PUBACK arrived, at QoS
// 0 when it was written with CONNECT. It fails when the connection was
// refused, lost or closed first, or when the protocol sends nothing behind
// its connect (AMQP, CoAP). Safe to call before, during and after Dial.
func (m *EarlyMessage) Receipt() *Receipt {
	m.init()
	return m.receipt
}

// Complete completes the receipt; the first call wins. For implementations
// of Client.
func (m *EarlyMessage) Complete(at time.Time, err error) {
	m.init()
	m.complete(at, err)
}

// Protocol versions accepted in Options.ProtocolVersion.
const (
	ProtocolMQTT311 = 4 // MQTT 3.1.1 (also accepted as 3)
	ProtocolMQTT5   = 5
)

// Options configure a client. The zero value is usable: every field
// documents its default.
type Options struct {
	// ClientID identifies the session at the broker. Default: "iotq-"
	// followed by 12 random hex digits.
	ClientID string
	// Username and Password for the broker; empty means none.
	Username string
	Password string
	// PersistentSession asks the broker to keep the session (subscriptions,
	// queued QoS 1/2 messages) after disconnect: clean session = false in
	// MQTT 3.1.1, clean start = false plus SessionExpiry in MQTT 5.
	// The queued messages arrive right behind CONNACK, before Subscribe
	// can be called: the MQTT client holds them, unacknowledged, and hands
	// each to the handler of the first Subscribe whose filter matches it
	// (client/mqtt). Default false (a clean session, as mosquitto_pub/sub
	// do).
	PersistentSession bool
	// SessionExpiry is the MQTT 5 session expiry interval used when
	// PersistentSession is set. Default 24h.
	SessionExpiry time.Duration
	// KeepAlive is the MQTT keep-alive interval. Default 60s.
	KeepAlive time.Duration
	// ProtocolVersion: 3 or 4 mean MQTT 3.1.1, 5 means MQTT 5.0. Default
	// (0) is MQTT 3.1.1, the version every broker speaks.
	ProtocolVersion int
	// CAFile is a PEM file with the CA certificates that sign the broker's
	// certificate (mqtts, wss, quic). Default: the system roots.
	CAFile string
	// Insecure skips verification of the broker's certificate. For tests
	// only; tickets saved this way are never offered to a verified session.
	Insecure bool
	// ServerName overrides the name checked in the broker's certificate.
	// Default: the URL host.
	ServerName string
	// TLSConfig, if set, is the base TLS configuration (CAFile, Insecure and
	// ServerName are applied on a clone of it). Default: TLS 1.2 minimum.
	TLSConfig *tls.Config
	// SessionCacheFile persists TLS session tickets so that a new process
	// resumes (QUIC: 0-RTT) — a transport.FileSessionCache, mode 0600.
	// Entries are keyed by transport and address, so QUIC tickets and those
	// of TLS over TCP (mqtts, wss) never mix. Close writes the file.
	// Default: no persistence (a new process does a full handshake).
	SessionCacheFile string
	// Will is the last-will message; nil means none.
	Will *Will
	// Early, if set, is a message sent in the same write as CONNECT,
	// before the CONNACK arrives (MQTT 3.1.1 section 3.1.4 lets a client
	// send packets right after CONNECT). Over QUIC with 0-RTT it leaves in
	// the first flight, so it can be delivered half a round trip after the
	// dial starts (if the broker processes early data: docs/0rtt.md). At
	// QoS 1 its Receipt (Early.Receipt) completes on the broker's PUBACK,
	// which the client takes out of the stream before the MQTT library
	// sees it; at QoS 0 it completes when written. If the broker refuses
	// the connection the message is dropped and the receipt fails.
	// ConnectionInfo.EarlySent tells when it was written. MQTT only: other
	// protocols fail the receipt. Default nil: paho sends nothing before
	// CONNACK.
	Early *EarlyMessage
	// QUIC tunes QUIC connections; zero values mean transport's defaults.
	QUIC transport.QUICOptions
	// ConnectTimeout bounds dialling plus CONNACK. Default 30s.
	ConnectTimeout time.Duration
	// AckTimeout bounds the wait for the acknowledgement of a QoS 1/2
	// publish (after which its receipt fails) and of SUBSCRIBE. Default 60s,
	// enough for a satellite link with loss.
	AckTimeout time.Duration
	// Logger receives debug and error logs; nil discards them.
	Logger *slog.Logger
}

// WithDefaults returns a copy of o with the documented defaults filled in.
// randomID supplies the default client identifier suffix.
func (o Options) WithDefaults(randomID func() string) Options {
	if o.ClientID == "" {
		o.ClientID = "iotq-" + randomID()
	}
	if o.SessionExpiry == 0 {
		o.SessionExpiry = 24 * time.Hour
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = 60 * time.Second
	}
	if o.ProtocolVersion == 0 || o.ProtocolVersion == 3 {
		o.ProtocolVersion = ProtocolMQTT311
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 30 * time.Second
	}
	if o.AckTimeout == 0 {
		o.AckTimeout = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Validate reports every problem of o (after defaults) at once.
func (o Options) Validate() error {
	var errs []error
	if o.ProtocolVersion != 0 && o.ProtocolVersion != 3 && o.ProtocolVersion != ProtocolMQTT311 && o.ProtocolVersion != ProtocolMQTT5 {
		errs = append(errs, fmt.Errorf("ProtocolVersion %d: want 3 (MQTT 3.1.1) or 5 (MQTT 5.0)", o.ProtocolVersion))
	}
	if o.KeepAlive < 0 || o.KeepAlive > 65535*time.Second {
		errs = append(errs, fmt.Errorf("KeepAlive %s: want 1s to 18h12m15s", o.KeepAlive))
	}
	if o.SessionExpiry < 0 {
		errs = append(errs, fmt.Errorf("SessionExpiry %s: must not be negative", o.SessionExpiry))
	}
	if o.ConnectTimeout < 0 || o.AckTimeout < 0 {
		errs = append(errs, errors.New("ConnectTimeout and AckTimeout must not be negative"))
	}
	if o.Will != nil {
		if o.Will.Topic == "" {
			errs = append(errs, errors.New("Will.Topic is empty: a will needs a topic"))
		}
		if o.Will.QoS > 2 {
			errs = append(errs, fmt.Errorf("Will.QoS %d: want 0, 1 or 2", o.Will.QoS))
		}
	}
	if o.Early != nil && (o.Early.Topic == "" || strings.ContainsAny(o.Early.Topic, "+#")) {
		errs = append(errs, fmt.Errorf("Early.Topic %q: want a topic name without wildcards", o.Early.Topic))
	}
	if o.Early != nil && o.Early.QoS > 1 {
		errs = append(errs, fmt.Errorf("Early.QoS %d: want 0 or 1 (a QoS 2 exchange needs PUBREC and PUBREL from the MQTT library)", o.Early.QoS))
	}
	if o.Password != "" && o.Username == "" && o.ProtocolVersion != ProtocolMQTT5 {
		errs = append(errs, errors.New("Password without Username: MQTT 3.1.1 needs a username to send a password")) //nolint:staticcheck // ST1005: starts with the Options field name, like the other messages here
	}
	return errors.Join(errs...)
}

// MatchTopic reports whether topic matches the MQTT subscription filter
// (with + and # wildcards; topics starting with $ are not matched by
// filters starting with a wildcard [MQTT-4.7.2-1]; a shared subscription
// "$share/GROUP/FILTER" matches like FILTER).
func MatchTopic(filter, topic string) bool {
	if rest, ok := strings.CutPrefix(filter, "$share/"); ok {
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			filter = rest[i+1:]
		}
	}
	return mqttname.Match(filter, topic)
}

// PeerSaidWhy reports whether err carries the server's own reason for
// closing the connection (a QUIC application error from the remote side
// with a reason phrase, such as iotq gateway's 0x101 "no upstream
// reachable"). A client's hint about its port or protocol would then
// contradict what the server said, so it is left out.
func PeerSaidWhy(err error) bool {
	var ae *quic.ApplicationError
	return errors.As(err, &ae) && ae.Remote && ae.ErrorMessage != ""
}
