package client

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/iotq/iotq/client/internal/core"
	"github.com/iotq/iotq/client/mqtt"
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

// Schemes lists the URL schemes Dial understands.
func Schemes() []string { return []string{"mqtt", "mqtts", "ws", "wss", "quic"} }

// Dial connects to the broker at rawURL and returns once the broker accepted
// the session. The scheme picks protocol and transport: mqtt (TCP), mqtts
// (TLS), ws and wss (WebSocket, path /mqtt), quic (QUIC, ALPN "mqtt"), all
// speaking MQTT (3.1.1 unless opts.ProtocolVersion is 5). ctx bounds the
// connection attempt only; opts.ConnectTimeout bounds it too.
func Dial(ctx context.Context, rawURL string, opts Options) (Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("broker URL %q: %w (want e.g. mqtt://127.0.0.1:1883 or quic://host:14567)", rawURL, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "mqtt", "mqtts", "ws", "wss", "quic", "tcp", "tls", "ssl":
		return mqtt.Dial(ctx, rawURL, opts)
	case "":
		return nil, fmt.Errorf("broker URL %q has no scheme (want %s://HOST:PORT)", rawURL, strings.Join(Schemes(), ", "))
	}
	return nil, fmt.Errorf("broker URL %q: unsupported scheme %q (want one of %s)", rawURL, u.Scheme, strings.Join(Schemes(), ", "))
}
