package mochi

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/iotq/iotq/broker/engine"
	"github.com/iotq/iotq/internal/mqttcore"
	"github.com/iotq/iotq/internal/mqttcore/packets"
)

// authHook decides at CONNECT who may connect, and on every publish and
// subscription what a client may read and write. mochi denies everything
// without an auth hook, so one is always registered.
//
// Every CONNECT check runs in OnConnect, before the session exists, in this
// order; the first failure answers with a CONNACK refusal and closes the
// connection:
//
//  1. the client identifier is at most limits.max_client_id_length bytes
//     (MQTT 5 0x85 "client identifier not valid", 3.1.1 return code 2);
//     the keep-alive is within limits.max_keep_alive (MQTT 5: lowered and
//     sent as Server Keep Alive; 3.1.1: a longer one is refused with
//     return code 2, as Mosquitto does);
//  2. the credentials are good (5: 0x86, 3.1.1: 4 "bad user name or
//     password");
//  3. the Will topic may be written by the user (5: 0x87, 3.1.1: 5 "not
//     authorized"), as Mosquitto does: without this check a client could
//     publish anywhere through its Will;
//  4. the client identifier is free or belongs to a session of the same
//     user (5: 0x87, 3.1.1: 5): another user would otherwise take the
//     session over, with its subscriptions and queued messages (MQTT 5
//     section 5.4.2). The owner is the username stored with the session,
//     so it survives restarts.
type authHook struct {
	mqttcore.HookBase
	a        engine.Authorizer // nil: everyone may connect, read and write
	srv      *mqttcore.Server
	maxIDLen int
	maxKeep  uint16 // seconds; 0: no limit
	maxSubs  int    // subscriptions per client
	obs      engine.Observer
	log      *rateLimitedLog
	pubLog   *rateLimitedLog // refused publishes (per message)
}

func (h *authHook) ID() string { return "iotq-auth" }

func (h *authHook) Provides(b byte) bool {
	return b == mqttcore.OnConnect || b == mqttcore.OnConnectAuthenticate || b == mqttcore.OnACLCheck || b == mqttcore.OnSubscribed
}

// OnSubscribed counts refused subscriptions: over the per-client limit, or
// refused by the ACL.
func (h *authHook) OnSubscribed(cl *mqttcore.Client, pk packets.Packet, codes []byte) {
	for i, c := range codes {
		if c < packets.ErrUnspecifiedError.Code || i >= len(pk.Filters) {
			continue
		}
		f := pk.Filters[i].Filter
		switch {
		case c == packets.ErrQuotaExceeded.Code:
			h.obs.Refused(engine.RefuseSubscriptions)
		case !h.OnACLCheck(cl, f, false):
			h.obs.Refused(engine.RefuseSubscribeACL)
		case cl.Properties.ProtocolVersion < 5 && h.maxSubs > 0 && cl.State.Subscriptions.Len() >= h.maxSubs:
			h.obs.Refused(engine.RefuseSubscriptions) // 3.1.1 has only 0x80
		default:
			continue
		}
		h.log.warn("subscription refused", "client", cl.ID, "filter", f, "code", c)
	}
}

// CONNACK return codes of MQTT 3.1.1 (mochi's table maps neither "bad user
// name or password" nor "not authorized" right).
const (
	v3IdentifierRejected   = 0x02
	v3BadUserNameOrPasswd  = 0x04
	v3NotAuthorized        = 0x05
	logClientIDPrefixBytes = 64
)

func (h *authHook) OnConnect(cl *mqttcore.Client, pk packets.Packet) error {
	user := cl.Properties.Username
	anonymous := len(user) == 0
	if n := len(cl.ID); n > h.maxIDLen {
		return h.refuse(cl, engine.RefuseClientID, packets.ErrClientIdentifierNotValid, v3IdentifierRejected,
			fmt.Sprintf("client identifier is %d bytes, the limit is %d", n, h.maxIDLen))
	}
	if !h.boundKeepAlive(cl) {
		return h.refuse(cl, engine.RefuseKeepAlive, packets.ErrClientIdentifierNotValid, v3IdentifierRejected,
			fmt.Sprintf("keep-alive %ds exceeds the limit of %ds", cl.State.Keepalive, h.maxKeep))
	}
	if h.a != nil && !h.a.Authenticate(pk.Connect.Username, pk.Connect.Password, pk.Connect.UsernameFlag) {
		return h.refuse(cl, engine.RefuseCredentials, packets.ErrBadUsernameOrPassword, v3BadUserNameOrPasswd, "bad user name or password")
	}
	if w := cl.Properties.Will; w.Flag > 0 && h.a != nil && !h.a.Authorize(string(user), anonymous, w.TopicName, true) {
		return h.refuse(cl, engine.RefuseWill, packets.ErrNotAuthorized, v3NotAuthorized, "not authorized to publish the will topic")
	}
	if old, ok := h.srv.Clients.Get(cl.ID); ok && !bytes.Equal(old.Properties.Username, user) {
		return h.refuse(cl, engine.RefuseSessionOwner, packets.ErrNotAuthorized, v3NotAuthorized, "client identifier belongs to another user's session")
	}
	return nil
}

// boundKeepAlive applies limits.max_keep_alive: an MQTT 5 client that asks
// for more, or for none, is given the limit as Server Keep Alive
// [MQTT-3.2.2-21]. An MQTT 3.1.1 client cannot be told; one that asks for
// more is refused (false); one without keep-alive (0) is let through.
func (h *authHook) boundKeepAlive(cl *mqttcore.Client) bool {
	k := cl.State.Keepalive
	if h.maxKeep == 0 || (k != 0 && k <= h.maxKeep) {
		return true
	}
	if cl.Properties.ProtocolVersion < 5 {
		return k == 0
	}
	cl.State.Keepalive = h.maxKeep
	cl.State.ServerKeepalive = true
	return true
}

// refuse answers a CONNECT with a refusal and returns the error that ends
// the connection.
func (h *authHook) refuse(cl *mqttcore.Client, kind string, v5 packets.Code, v3 byte, why string) error {
	h.obs.Refused(kind)
	ack := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connack}, ReasonCode: v5.Code}
	if cl.Properties.ProtocolVersion < 5 {
		ack.ReasonCode = v3
	} else {
		ack.Properties.ReasonString = why
	}
	werr := cl.WritePacket(ack)
	id := cl.ID
	if len(id) > logClientIDPrefixBytes {
		id = id[:logClientIDPrefixBytes] + "..."
	}
	h.log.warn("connection refused", "reason", why, "client", id, "user", string(cl.Properties.Username), "remote", cl.Net.Remote, "listener", cl.Net.Listener, "write_error", werr)
	return fmt.Errorf("connection refused: %s: %w", why, v5)
}

// OnConnectAuthenticate lets through what OnConnect accepted.
func (h *authHook) OnConnectAuthenticate(cl *mqttcore.Client, pk packets.Packet) bool { return true }

func (h *authHook) OnACLCheck(cl *mqttcore.Client, topic string, write bool) bool {
	if h.a == nil {
		return true
	}
	if !write {
		// A shared subscription "$share/NAME/FILTER" reads FILTER.
		if rest, ok := strings.CutPrefix(topic, "$share/"); ok {
			if _, f, ok := strings.Cut(rest, "/"); ok {
				topic = f
			}
		}
	}
	u := cl.Properties.Username
	ok := h.a.Authorize(string(u), len(u) == 0, topic, write)
	if !ok && write {
		// Only PUBLISH packets are checked for writing here (the Will is
		// checked at CONNECT): a refused publish, dropped (QoS 0) or
		// answered "not authorized".
		h.obs.Refused(engine.RefusePublishACL)
		h.pubLog.warn("publish refused by the ACL", "client", cl.ID, "user", string(u), "topic", topic)
	}
	return ok
}
