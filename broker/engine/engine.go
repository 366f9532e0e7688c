package engine

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"time"
)

// Engine is the MQTT engine behind a broker.Server. Listeners, configuration, auth
// and metrics talk to this interface only, so the engine can be replaced
// without touching them. Implementations are safe for concurrent use.
type Engine interface {
	// Start loads the store and starts housekeeping. Called once.
	Start() error
	// ServeConn runs the MQTT session of one accepted connection;
	// listener names the listener (its URL) for logs and metrics. It takes
	// ownership of c and calls ended exactly once, with the session's end,
	// when the session has ended: before it returns, or later from another
	// goroutine when an idle client gave its goroutine up
	// (flow.park_idle_after).
	ServeConn(listener string, c net.Conn, ended func(error))
	// DisconnectAll tells every connected client that the server is
	// shutting down and closes its connection.
	DisconnectAll()
	// WaitClients waits until every ServeConn has returned or ctx ends.
	WaitClients(ctx context.Context) error
	// Close stops housekeeping and flushes and closes the store. Called once,
	// after DisconnectAll and WaitClients.
	Close() error
	// Stats returns a snapshot of the engine's counters.
	Stats() Stats
	// Publish puts a message into the topic space (Server.Publish).
	Publish(m Message) error
	// Subscribe delivers matching messages to fn (Server.Subscribe).
	Subscribe(filter string, fn func(Message)) (cancel func(), err error)
	// Subscriptions returns the number of subscriptions of the connected
	// client id (0 if it is not connected).
	Subscriptions(clientID string) int
	// QueuedBytes returns the payload and topic bytes held for delivery by
	// all sessions, and by the largest one (limits.max_queued_bytes).
	QueuedBytes() (sum, largest int64)
}

// Config is what every engine is built from. Flow and Limits arrive
// complete, with the broker's defaults applied.
type Config struct {
	Logger       *slog.Logger
	Auth         Authorizer // nil: everyone may connect, read and write
	Obs          Observer   // never nil
	StorePath    string     // "" : no persistence
	InflightPath string     // in-flight messages (group commit)
	Fsync        bool       // fsync the store on every write
	Flow         FlowOptions
	Limits       LimitsOptions
}

// Authorizer decides who may connect and what they may read and write.
type Authorizer interface {
	// Authenticate checks the credentials of a CONNECT. hasUser is false for
	// an anonymous client (no username).
	Authenticate(username, password []byte, hasUser bool) bool
	// Authorize checks that user may read (write=false) or write topic.
	// anonymous is true for clients that gave no username.
	Authorize(user string, anonymous bool, topic string, write bool) bool
}

// Observer receives engine events for metrics. Methods must not block.
type Observer interface {
	MessageIn(qos byte)
	MessageOut(qos byte, bytes int)
	Dropped(reason string, qos byte)
	// Stalled counts a publisher held back for max_stall.
	Stalled()
	// Refused counts a refused request (RefusalKinds).
	Refused(kind string)
	SessionOpened(listener string)
	SessionClosed(listener string)
}

// Drop reasons used in metrics and logs.
const (
	DropQueueFull    = "queue_full"           // outbound queue full (QoS 0 under PolicyDrop)
	DropPacketIDs    = "packet_ids_exhausted" // no packet identifier left
	DropExpired      = "expired"              // QoS 1/2 message expired before delivery
	DropSlowConsumer = "slow_consumer"        // subscriber disconnected by the slow-consumer policy
	DropInflightFull = "inflight_full"        // QoS 1/2 not delivered: the subscriber's session holds max_inflight messages
	DropQueuedBytes  = "queued_bytes"         // not delivered: the subscriber's session holds limits.max_queued_bytes
)

// DropReasons lists every drop reason: the metrics export each one, so a
// reason that never happened reads 0 rather than missing.
var DropReasons = []string{DropQueueFull, DropPacketIDs, DropExpired, DropSlowConsumer, DropInflightFull, DropQueuedBytes}

// Refusal kinds used in metrics.
const (
	RefuseClientID      = "connect_client_id"     // client identifier too long
	RefuseKeepAlive     = "connect_keep_alive"    // MQTT 3.1.1 keep-alive over the limit
	RefuseCredentials   = "connect_credentials"   // bad user name or password
	RefuseWill          = "connect_will_topic"    // Will topic not writable by the user
	RefuseSessionOwner  = "connect_session_owner" // client identifier owned by another user
	RefuseSubscriptions = "subscription_limit"    // limits.max_subscriptions reached
	RefuseSubscribeACL  = "subscription_acl"      // subscription refused by the ACL
	RefusePublishACL    = "publish_acl"           // PUBLISH to a topic the ACL does not let the client write
)

// RefusalKinds lists every refusal kind, for the same reason.
var RefusalKinds = []string{RefuseClientID, RefuseKeepAlive, RefuseCredentials, RefuseWill, RefuseSessionOwner, RefuseSubscriptions, RefuseSubscribeACL, RefusePublishACL}

// Stats is a snapshot of engine counters.
type Stats struct {
	ClientsConnected int64
	Subscriptions    int64
	Retained         int64
	Inflight         int64
	MessagesDropped  int64 // engine's own count of outbound-queue drops
	InflightDropped  int64
	ClientPanics     int64 // recovered panics, each closed one connection
}

// ErrShuttingDown ends a connection handed to ServeConn after
// DisconnectAll: it is closed without being served.
var ErrShuttingDown = errors.New("server shutting down: connection not served")

// WriteWatcher is implemented by connections that know how long their
// current Write has been blocked (0 when no Write is in progress); now is
// time.Now().UnixNano(). An engine uses it, where the connection handed to
// ServeConn provides it, for backpressure and for Flow.WriteTimeout.
type WriteWatcher interface {
	WriteBlockedFor(now int64) time.Duration
}
