package broker

import (
	"context"
	"log/slog"
	"net"
)

// engine is the MQTT engine behind a Server. Listeners, configuration, auth
// and metrics talk to this interface only, so the engine can be replaced
// without touching them. Implementations are safe for concurrent use.
type engine interface {
	// start loads the store and starts housekeeping. Called once.
	start() error
	// serveConn runs the MQTT session of one accepted connection;
	// listener names the listener (its URL) for logs and metrics. It takes
	// ownership of c and calls ended exactly once, with the session's end,
	// when the session has ended: before it returns, or later from another
	// goroutine when an idle client gave its goroutine up
	// (flow.park_idle_after).
	serveConn(listener string, c net.Conn, ended func(error))
	// disconnectAll tells every connected client that the server is
	// shutting down and closes its connection.
	disconnectAll()
	// waitClients waits until every serveConn has returned or ctx ends.
	waitClients(ctx context.Context) error
	// close stops housekeeping and flushes and closes the store. Called once,
	// after disconnectAll and waitClients.
	close() error
	// stats returns a snapshot of the engine's counters.
	stats() engineStats
	// publish puts a message into the topic space (Server.Publish).
	publish(m Message) error
	// subscribe delivers matching messages to fn (Server.Subscribe).
	subscribe(filter string, fn func(Message)) (cancel func(), err error)
	// subscriptions returns the number of subscriptions of the connected
	// client id (0 if it is not connected).
	subscriptions(clientID string) int
	// queuedBytes returns the payload and topic bytes held for delivery by
	// all sessions, and by the largest one (limits.max_queued_bytes).
	queuedBytes() (sum, largest int64)
}

// engineConfig is what every engine needs.
type engineConfig struct {
	logger       *slog.Logger
	auth         authorizer // nil: everyone may connect, read and write
	obs          observer   // never nil
	storePath    string     // "" : no persistence
	inflightPath string     // in-flight messages (group commit)
	fsync        bool       // fsync the store on every write
	flow         FlowOptions
	limits       LimitsOptions
}

// authorizer decides who may connect and what they may read and write.
type authorizer interface {
	// authenticate checks the credentials of a CONNECT. hasUser is false for
	// an anonymous client (no username).
	authenticate(username, password []byte, hasUser bool) bool
	// authorize checks that user may read (write=false) or write topic.
	// anonymous is true for clients that gave no username.
	authorize(user string, anonymous bool, topic string, write bool) bool
}

// observer receives engine events for metrics. Methods must not block.
type observer interface {
	messageIn(qos byte)
	messageOut(qos byte, bytes int)
	dropped(reason string, qos byte)
	// stalled counts a publisher held back for max_stall.
	stalled()
	// refused counts a refused request (refusalKinds).
	refused(kind string)
	sessionOpened(listener string)
	sessionClosed(listener string)
}

// Drop reasons used in metrics and logs.
const (
	dropQueueFull    = "queue_full"           // outbound queue full (QoS 0 under PolicyDrop)
	dropPacketIDs    = "packet_ids_exhausted" // no packet identifier left
	dropExpired      = "expired"              // QoS 1/2 message expired before delivery
	dropSlowConsumer = "slow_consumer"        // subscriber disconnected by the slow-consumer policy
	dropInflightFull = "inflight_full"        // QoS 1/2 not delivered: the subscriber's session holds max_inflight messages
	dropQueuedBytes  = "queued_bytes"         // not delivered: the subscriber's session holds limits.max_queued_bytes
)

// dropReasons lists every drop reason: the metrics export each one, so a
// reason that never happened reads 0 rather than missing.
var dropReasons = []string{dropQueueFull, dropPacketIDs, dropExpired, dropSlowConsumer, dropInflightFull, dropQueuedBytes}

// Refusal kinds used in metrics.
const (
	refuseClientID      = "connect_client_id"     // client identifier too long
	refuseKeepAlive     = "connect_keep_alive"    // MQTT 3.1.1 keep-alive over the limit
	refuseCredentials   = "connect_credentials"   // bad user name or password
	refuseWill          = "connect_will_topic"    // Will topic not writable by the user
	refuseSessionOwner  = "connect_session_owner" // client identifier owned by another user
	refuseSubscriptions = "subscription_limit"    // limits.max_subscriptions reached
	refuseSubscribeACL  = "subscription_acl"      // subscription refused by the ACL
	refusePublishACL    = "publish_acl"           // PUBLISH to a topic the ACL does not let the client write
)

var refusalKinds = []string{refuseClientID, refuseKeepAlive, refuseCredentials, refuseWill, refuseSessionOwner, refuseSubscriptions, refuseSubscribeACL, refusePublishACL}

// engineStats is a snapshot of engine counters.
type engineStats struct {
	clientsConnected int64
	subscriptions    int64
	retained         int64
	inflight         int64
	messagesDropped  int64 // engine's own count of outbound-queue drops
	inflightDropped  int64
	clientPanics     int64 // recovered panics, each closed one connection
}
