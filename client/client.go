package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/iotq/iotq/client/amqp"
	"github.com/iotq/iotq/client/coap"
	"github.com/iotq/iotq/client/internal/core"
	"github.com/iotq/iotq/client/mqtt"
	"github.com/iotq/iotq/transport/endpoint"
)

// Types of the common API (defined in client/internal/core).
type (
	Client           = core.Client
	Options          = core.Options
	Will             = core.Will
	EarlyMessage     = core.EarlyMessage
	PublishOptions   = core.PublishOptions
	SubscribeOptions = core.SubscribeOptions
	Message          = core.Message
	Handler          = core.Handler
	Receipt          = core.Receipt
	ConnectionInfo   = core.ConnectionInfo
	// DialFunc is the signature of a protocol package's Dial (a row of the
	// dialer table).
	DialFunc = core.DialFunc
)

// Errors of the common API.
var (
	ErrClosed         = core.ErrClosed
	ErrConnectionLost = core.ErrConnectionLost
	ErrPending        = core.ErrPending
)

// Protocol versions for Options.ProtocolVersion.
const (
	ProtocolMQTT311 = core.ProtocolMQTT311
	ProtocolMQTT5   = core.ProtocolMQTT5
)

// NewReceipt returns a pending Receipt and the function that completes it,
// for implementations of Client outside this module.
func NewReceipt() (*Receipt, func(at time.Time, err error)) { return core.NewReceipt() }

// MatchTopic reports whether an MQTT topic matches a subscription filter.
func MatchTopic(filter, topic string) bool { return core.MatchTopic(filter, topic) }

// Endpoint is a parsed URL (transport/endpoint): protocol, transport,
// address and options. Parse it once where the URL enters (ParseURL) and
// pass it down (DialEndpoint).
type Endpoint = endpoint.Endpoint

// ParseURL parses a client URL; see transport/endpoint for the scheme table.
func ParseURL(raw string) (Endpoint, error) { return endpoint.Parse(raw) }

// ErrProtocolNotBuilt: the scheme table knows the URL's protocol, but no
// implementation of it is built into this client yet.
var ErrProtocolNotBuilt = errors.New("not built into this client yet")

// dialers is the table of protocol implementations: one row per protocol
// package. Adding a protocol (client/coap, client/amqp) is one row here;
// its URL schemes are rows of the scheme table in transport/endpoint.
func dialers() map[endpoint.Protocol]core.DialFunc {
	return map[endpoint.Protocol]core.DialFunc{
		endpoint.ProtocolMQTT: mqtt.Dial,
		endpoint.ProtocolAMQP: amqp.Dial,
		endpoint.ProtocolCoAP: coap.Dial,
	}
}

// Schemes lists the URL schemes Dial can connect with (those whose protocol
// is built in).
func Schemes() []string {
	d := dialers()
	var out []string
	for _, r := range endpoint.Schemes() {
		if d[r.Protocol] != nil {
			out = append(out, string(r.Scheme))
		}
	}
	return out
}

// Dial parses rawURL and calls DialEndpoint.
func Dial(ctx context.Context, rawURL string, opts Options) (Client, error) {
	ep, err := endpoint.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	return DialEndpoint(ctx, ep, opts)
}

// DialEndpoint connects to the server at ep and returns once it accepted
// the session. ep.Protocol picks the implementation (the dialer table):
// mqtt (schemes mqtt, mqtts, ws, wss, quic; MQTT 3.1.1 unless
// opts.ProtocolVersion is 5), amqp (amqp, amqps, amqp+quic; AMQP 1.0,
// package client/amqp). A protocol of the scheme table that is not
// built in fails with ErrProtocolNotBuilt. ctx bounds the connection
// attempt only; opts.ConnectTimeout bounds it too.
func DialEndpoint(ctx context.Context, ep Endpoint, opts Options) (Client, error) {
	dial := dialers()[ep.Protocol]
	if dial == nil {
		return nil, fmt.Errorf("dial %s: protocol %s %w (built in: %s)", ep, ep.Protocol, ErrProtocolNotBuilt, strings.Join(Schemes(), ", "))
	}
	c, err := dial(ctx, ep, opts)
	if opts.Early != nil && ep.Protocol != endpoint.ProtocolMQTT && ep.Protocol != endpoint.ProtocolAMQP {
		// MQTT sends a message behind its connect, AMQP pipelines its start
		opts.Early.Complete(time.Now(), fmt.Errorf("early publish %s: %s sends nothing behind its connect; publish after Dial", opts.Early.Topic, ep.Protocol))
	}
	return c, err
}
