// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2023 mochi-mqtt, mochi-co
// SPDX-FileContributor: mochi-co

package mqttcore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/xid"

	"github.com/iotq/iotq/internal/mqttcore/packets"
)

const (
	defaultKeepalive             uint16 = 10 // the default connection keepalive value in seconds.
	defaultClientProtocolVersion byte   = 4  // the default mqtt protocol version of connecting clients (if somehow unspecified).
	minimumKeepalive             uint16 = 5  // the minimum recommended keepalive - values under with display a warning.
)

var (
	ErrMinimumKeepalive = errors.New("client keepalive is below minimum recommended value and may exhibit connection instability")
)

// ReadFn is the function signature for the function used for reading and processing new packets.
type ReadFn func(*Client, packets.Packet) error

// Clients contains a map of the clients known by the broker.
type Clients struct {
	internal map[string]*Client // clients known by the broker, keyed on client id.
	sync.RWMutex
}

// NewClients returns an instance of Clients.
func NewClients() *Clients {
	return &Clients{
		internal: make(map[string]*Client),
	}
}

// Add adds a new client to the clients map, keyed on client id.
func (cl *Clients) Add(val *Client) {
	cl.Lock()
	defer cl.Unlock()
	cl.internal[val.ID] = val
}

// GetAll returns all the clients.
func (cl *Clients) GetAll() map[string]*Client {
	cl.RLock()
	defer cl.RUnlock()
	m := map[string]*Client{}
	for k, v := range cl.internal {
		m[k] = v
	}
	return m
}

// Range calls fn for every client, holding the read lock: unlike GetAll it
// copies nothing. The engine's once-a-second expiry sweeps copied the map
// twice a second through GetAll: 3.5 MB of garbage per second with 10 000
// idle clients, which kept the collector running on an idle broker.
// fn must not call methods of cl (it would lock cl again) nor block.
// [iotq patch 37]
func (cl *Clients) Range(fn func(*Client)) {
	cl.RLock()
	defer cl.RUnlock()
	for _, c := range cl.internal {
		fn(c)
	}
}

// Get returns the value of a client if it exists.
func (cl *Clients) Get(id string) (*Client, bool) {
	cl.RLock()
	defer cl.RUnlock()
	val, ok := cl.internal[id]
	return val, ok
}

// Len returns the length of the clients map.
func (cl *Clients) Len() int {
	cl.RLock()
	defer cl.RUnlock()
	val := len(cl.internal)
	return val
}

// Delete removes a client from the internal map.
func (cl *Clients) Delete(id string) {
	cl.Lock()
	defer cl.Unlock()
	delete(cl.internal, id)
}

// GetByListener returns clients matching a listener id.
func (cl *Clients) GetByListener(id string) []*Client {
	cl.RLock()
	defer cl.RUnlock()
	clients := make([]*Client, 0, cl.Len())
	for _, client := range cl.internal {
		if client.Net.Listener == id && !client.Closed() {
			clients = append(clients, client)
		}
	}
	return clients
}

// Client contains information about a client known by the broker.
type Client struct {
	Properties   ClientProperties               // client properties
	State        ClientState                    // the operational state of the client.
	Net          ClientConnection               // network connection state of the client
	ID           string                         // the client id.
	ops          *ops                           // ops provides a reference to server ops.
	park         *clientPark                    // parking state, nil if the client never parks [iotq patch 18]
	attached     [HookSlots]atomic.Pointer[any] // hooks' per-client state (Attach) [iotq patch 50]
	sync.RWMutex                                // mutex
}

// ClientConnection contains the connection transport and metadata for the client.
type ClientConnection struct {
	Conn     net.Conn      // the net.Conn used to establish the connection
	bconn    *connReader   // a buffered net.Conn for reading packets [iotq patch 12]
	raw      rawWriter     // Conn's socket, written without waiting; nil: none [iotq patch 40]
	outbuf   *bytes.Buffer // a buffer for writing packets
	Remote   string        // the remote address of the client
	Listener string        // listener id of the client
	Inline   bool          // if true, the client is the built-in 'inline' embedded client
}

// ClientProperties contains the properties which define the client behaviour.
type ClientProperties struct {
	Props           packets.Properties
	Will            Will
	Username        []byte
	ProtocolVersion byte
	Clean           bool
}

// Will contains the last will and testament details for a client connection.
type Will struct {
	Payload           []byte                 // -
	User              []packets.UserProperty // -
	TopicName         string                 // -
	Flag              uint32                 // 0,1
	WillDelayInterval uint32                 // -
	Qos               byte                   // -
	Retain            bool                   // -
}

// ClientState tracks the state of the client.
type ClientState struct {
	TopicAliases    TopicAliases          // a map of topic aliases
	stopCause       atomic.Pointer[error] // reason for stopping [iotq patch 55]
	Inflight        *Inflight             // a map of in-flight qos messages
	Subscriptions   *Subscriptions        // a map of the subscription filters a client maintains
	disconnected    int64                 // the time the client disconnected in unix time, for calculating expiry
	outboundBytes   atomic.Int64          // what the QoS 0 messages in the outbound queue cost (QueuedCost) [iotq patch 10, 22]
	outbound        outQueue              // queue for pending outbound packets, allocated when used [iotq patch 11]
	deliveries      deliveryBatch         // subscribers whose writer this client's reader holds [iotq patch 40]
	endOnce         sync.Once             // only end once
	isTakenOver     atomic.Bool           // used to identify orphaned clients
	ended           atomic.Bool           // Stop ran: the client is closed [iotq patch 55]
	packetID        uint32                // the current highest packetID
	packetIDMu      sync.Mutex            // serialises NextPacketID [iotq patch 2]
	Keepalive       uint16                // the number of seconds the connection can wait
	ServerKeepalive bool                  // keepalive was set by the server
	sinceDeadline   uint8                 // packets read since the deadline was refreshed (reader only) [iotq patch 30]
	replyPending    bool                  // writeReply left answers in the output buffer (reader only) [iotq patch 31]
	opened          bool                  // made by newClient: a Client made otherwise counts as closed [iotq patch 55]
}

// newClient returns a new instance of Client. This is almost exclusively used by Server
// for creating new clients, but it lives here because it's not dependent.
func newClient(c net.Conn, o *ops) *Client {
	cl := &Client{
		State: ClientState{
			Inflight:      NewInflights(),
			Subscriptions: NewSubscriptions(),
			TopicAliases:  NewTopicAliases(o.options.Capabilities.TopicAliasMaximum),
			opened:        true,
			Keepalive:     defaultKeepalive,
			outbound:      outQueue{max: int(o.options.Capabilities.MaximumClientWritesPending)}, // [iotq patch 11]
		},
		Properties: ClientProperties{
			ProtocolVersion: defaultClientProtocolVersion, // default protocol version
		},
		ops: o,
	}

	if c != nil {
		cl.Net = ClientConnection{
			Conn:   c,
			bconn:  newConnReader(c, o.readBufs, o.options.ClientNetReadBufferSize), // [iotq patch 12]
			Remote: c.RemoteAddr().String(),
			raw:    newRawWriter(c), // [iotq patch 40]
		}
		cl.Net.bconn.owner = cl       // [iotq patch 40]
		cl.Net.bconn.raw = cl.Net.raw // [iotq patch 46]
		cl.Net.bconn.counted, _ = c.(DirectReadCounter)
	}

	return cl
}

// OutboundLen returns the number of packets waiting in the client's
// outbound queue. [iotq patch 1]
func (cl *Client) OutboundLen() int {
	return cl.State.outbound.Len()
}

// QueuedBytes returns what the messages the client's session holds for
// delivery cost (QueuedCost: payload, topic, properties and the engine's
// structure around each): QoS 1/2 messages not yet acknowledged (sent or
// not; for an offline session, everything queued for it) and QoS 0
// messages waiting in the outbound queue. [iotq patch 10, 22]
func (cl *Client) QueuedBytes() int64 {
	return cl.State.Inflight.Bytes() + cl.State.outboundBytes.Load()
}

// QueuePacket puts pk on the client's outbound queue, behind the packets
// already there, without blocking; if the queue is full it writes pk from a
// goroutine of its own. It reports false if the client is closed.
// [iotq patch 4]
func (cl *Client) QueuePacket(pk packets.Packet) bool {
	if cl.Closed() {
		return false
	}
	if !cl.enqueue(&pk) {
		go func() { _ = cl.WritePacket(pk) }()
	}
	return true
}

// enqueue puts pk on the outbound queue and starts a writer if none runs;
// it reports false if the queue is full. [iotq patch 11]
func (cl *Client) enqueue(pk *packets.Packet) bool {
	return cl.enqueueFrom(nil, pk)
}

// enqueueFrom is enqueue called while from's reader handles from's input:
// from's reader then becomes the writer (deliveryBatch) instead of a new
// goroutine. [iotq patch 40]
func (cl *Client) enqueueFrom(from *Client, pk *packets.Packet) bool {
	ok, start := cl.State.outbound.push(pk)
	if start && (from == nil || !from.State.deliveries.add(cl)) {
		go cl.WriteLoop()
	}
	return ok
}

// WriteLoop writes the pending outbound packets to the client connection
// and returns when the queue is empty or the client closed. [iotq patch 11]
// It runs only while packets are queued (enqueue starts it); upstream ran
// it for the client's whole life.
func (cl *Client) WriteLoop() {
	defer func() { // [iotq patch 19]
		if r := recover(); r != nil {
			cl.Stop(cl.recovered(r, "writing"))
		}
	}()
	cl.flushLeft() // [iotq patch 40]
	for {
		if cl.Closed() {
			// Nothing will be written: let go of the queue (and of the
			// QoS 0 bytes it counted). QoS 1/2 messages stay in the
			// session's in-flight store.
			for {
				pk, ok := cl.State.outbound.pop()
				if !ok {
					return
				}
				cl.sent(pk)
			}
		}
		pk, ok := cl.State.outbound.pop()
		if !ok {
			return
		}
		if cl.stillInFlight(pk) {
			if err := cl.WritePacket(*pk); err != nil {
				// TODO : Figure out what to do with error
				cl.ops.log.Debug("failed publishing packet", "error", err, "client", cl.ID, "packet", pk)
			}
		}
		cl.sent(pk)
	}
}

// stillInFlight reports whether pk, taken from the outbound queue, is to
// be written: anything but a QoS 1/2 PUBLISH, or one whose session record
// (same packet identifier and Seq) is still there, which it marks as sent
// (DUP 1 for a resend [MQTT-3.3.1-1], and no expiry from now on, patch
// 57). A message the expiry sweep removed while it waited in the queue
// is not written: its identifier is free, and the client's PUBACK for it
// would complete the next message given the identifier, unseen.
// Upstream wrote it and marked nothing. [iotq patch 20, 22, 59]
func (cl *Client) stillInFlight(pk *packets.Packet) bool {
	if pk.FixedHeader.Type != packets.Publish || pk.FixedHeader.Qos == 0 {
		return true
	}
	return cl.State.Inflight.markSent(pk.PacketID, pk.Seq)
}

// sent accounts for pk leaving the outbound queue. [iotq patch 10]
func (cl *Client) sent(pk *packets.Packet) {
	if pk.FixedHeader.Type == packets.Publish && pk.FixedHeader.Qos == 0 {
		cl.State.outboundBytes.Add(-QueuedCost(pk)) // [iotq patch 22]
	}
}

// ParseConnect parses the connect parameters and properties for a client.
func (cl *Client) ParseConnect(lid string, pk packets.Packet) {
	cl.Net.Listener = lid

	cl.Properties.ProtocolVersion = pk.ProtocolVersion
	cl.Properties.Username = pk.Connect.Username
	cl.Properties.Clean = pk.Connect.Clean
	cl.Properties.Props = pk.Properties.Copy(false)

	if cl.Properties.Props.ReceiveMaximum > cl.ops.options.Capabilities.MaximumInflight { // 3.3.4 Non-normative
		cl.Properties.Props.ReceiveMaximum = cl.ops.options.Capabilities.MaximumInflight
	}

	if pk.Connect.Keepalive <= minimumKeepalive {
		cl.ops.log.Warn(
			ErrMinimumKeepalive.Error(),
			"client", cl.ID,
			"keepalive", pk.Connect.Keepalive,
			"recommended", minimumKeepalive,
		)
	}

	cl.State.Keepalive = pk.Connect.Keepalive                                              // [MQTT-3.2.2-22]
	cl.State.Inflight.ResetReceiveQuota(int32(cl.ops.options.Capabilities.ReceiveMaximum)) // server receive max per client
	cl.State.Inflight.ResetSendQuota(int32(cl.Properties.Props.ReceiveMaximum))            // client receive max
	cl.State.TopicAliases.Outbound = NewOutboundTopicAliases(cl.Properties.Props.TopicAliasMaximum)

	cl.ID = pk.Connect.ClientIdentifier
	if cl.ID == "" {
		cl.ID = xid.New().String() // [MQTT-3.1.3-6] [MQTT-3.1.3-7]
		cl.Properties.Props.AssignedClientID = cl.ID
	}

	if pk.Connect.WillFlag {
		var wp packets.Properties
		if pk.Connect.WillProperties != nil {
			wp = *pk.Connect.WillProperties
		}
		cl.Properties.Will = Will{
			Qos:               pk.Connect.WillQos,
			Retain:            pk.Connect.WillRetain,
			Payload:           pk.Connect.WillPayload,
			TopicName:         pk.Connect.WillTopic,
			WillDelayInterval: wp.WillDelayInterval,
			User:              wp.User,
		}
		if pk.Properties.SessionExpiryIntervalFlag &&
			pk.Properties.SessionExpiryInterval < wp.WillDelayInterval {
			cl.Properties.Will.WillDelayInterval = pk.Properties.SessionExpiryInterval
		}
		if pk.Connect.WillFlag {
			cl.Properties.Will.Flag = 1 // atomic for checking
		}
	}
}

// deadlineEvery is how many packets, at most, the reader handles from its
// buffer between two refreshes of the keep-alive deadline. [iotq patch 30]
const deadlineEvery = 64

// refreshDeadline refreshes the read/write deadline for the net.Conn connection.
// It returns the deadline (zero: none). [iotq patch 18]
func (cl *Client) refreshDeadline(keepalive uint16) time.Time {
	var expiry time.Time // nil time can be used to disable deadline if keepalive = 0
	if keepalive > 0 {
		expiry = time.Now().Add(time.Duration(keepalive+(keepalive/2)) * time.Second) // [MQTT-3.1.2-22]
	}

	if cl.Net.Conn != nil {
		_ = cl.Net.Conn.SetDeadline(expiry) // [MQTT-3.1.2-22]
	}
	return expiry
}

// NextPacketID returns the next available (unused) packet id for the client.
// If no unused packet ids are available, an error is returned and the client
// should be disconnected.
//
// [iotq patch 2] It takes its own lock, not the client's write lock: a
// writer blocked on a peer that stopped reading holds the write lock, and a
// publisher delivering to that client must not wait for it.
func (cl *Client) NextPacketID() (i uint32, err error) {
	cl.State.packetIDMu.Lock()
	defer cl.State.packetIDMu.Unlock()
	return cl.nextPacketIDLocked()
}

// nextPacketIDLocked is NextPacketID for a caller holding packetIDMu, who
// puts the message under the id into the in-flight store before it lets
// go: otherwise the id is free for the next caller too. [iotq patch 17]
func (cl *Client) nextPacketIDLocked() (i uint32, err error) {
	i = atomic.LoadUint32(&cl.State.packetID)
	started := i
	overflowed := false
	for {
		if overflowed && i == started {
			return 0, packets.ErrQuotaExceeded
		}

		if i >= cl.ops.options.Capabilities.maximumPacketID {
			overflowed = true
			i = 0
			continue
		}

		i++

		if !cl.State.Inflight.has(uint16(i)) { // [iotq patch 22]
			atomic.StoreUint32(&cl.State.packetID, i)
			return i, nil
		}
	}
}

// ResendInflightMessages attempts to resend any pending inflight messages to connected clients.
func (cl *Client) ResendInflightMessages(force bool) error {
	if cl.State.Inflight.Len() == 0 {
		return nil
	}
	return cl.resend(cl.State.Inflight.refs())
}

// resend sends the in-flight packets refs names, in their order, each if
// it is still in flight under the same Seq. [iotq patch 48] A reconnecting
// client gets exactly what its session held when the connection took it
// over: deliveries routed to the connection since are queued by their
// publishers. Upstream resent everything in flight, so a message delivered
// between the connection becoming the target and the resend went out
// twice under one packet identifier; the client acknowledged both, and
// when the first PUBACK had freed the identifier for the next message, the
// second completed that one unseen (a loss, under load, on session
// takeover).
func (cl *Client) resend(refs []inflightRef) error {
	defer cl.State.Inflight.endResend() // [iotq patch 61]
	limited := atomic.LoadInt32(&cl.State.Inflight.maximumSendQuota) > 0
	// [iotq patch 22] One packet at a time, in GetAll's order: GetAll
	// copied every packet of the session at once (65 535 x 816 bytes).
	for _, ref := range refs {
		id := ref.id
		tk, ok := cl.State.Inflight.Get(id)
		if !ok || tk.Seq != ref.seq {
			continue // acknowledged or moved meanwhile [iotq patch 48: or its id reused]
		}
		// [iotq patch 20] A PUBLISH in the session carries DUP 1 if it
		// may have been written before [MQTT-3.3.1-1]; one queued while
		// the client was away goes out with DUP 0, and from now on its
		// session copy (stored again here) says it was sent. Upstream set
		// DUP on every resend, first deliveries included.
		stored := tk
		if tk.FixedHeader.Type == packets.Publish {
			// [iotq patch 47] No more unacknowledged PUBLISH packets out
			// than the client's Receive Maximum [MQTT-3.3.4-9]. [iotq
			// patch 61] Every one waits, with the deliveries routed to
			// the connection meanwhile (beginResend), and they go below,
			// oldest first, as far as the quota allows: a new delivery
			// that took quota first would have left older ones waiting
			// behind it.
			if limited {
				cl.State.Inflight.markWaiting(tk.PacketID, tk.Seq)
				continue
			}
			m, ok := cl.State.Inflight.markSending(tk.PacketID, tk.Seq, cl.expiryOf)
			if !ok {
				continue // acknowledged or moved meanwhile
			}
			tk, stored = m, m
			stored.FixedHeader.Dup = true
		}
		cl.ops.hooks.OnQosPublish(cl, stored, stored.Created, 0)
		err := cl.WritePacket(tk)
		if err != nil {
			return err
		}

		if tk.FixedHeader.Type == packets.Puback || tk.FixedHeader.Type == packets.Pubcomp {
			if ok := cl.State.Inflight.Delete(tk.PacketID); ok {
				cl.ops.hooks.OnQosComplete(cl, tk)
				atomic.AddInt64(&cl.ops.info.Inflight, -1)
			}
		}
	}
	if !limited {
		return nil
	}
	cl.State.Inflight.endResend()
	for {
		tk, ok := cl.State.Inflight.releaseNext(cl.expiryOf)
		if !ok {
			return nil
		}
		stored := tk
		stored.FixedHeader.Dup = true
		cl.ops.hooks.OnQosPublish(cl, stored, stored.Created, 0)
		if err := cl.WritePacket(tk); err != nil {
			return err
		}
	}
}

// expiryOf is Server.expiryOf, for the client's server.
func (cl *Client) expiryOf(pk *packets.Packet) int64 {
	return messageExpiry(cl.ops.options.Capabilities.MaximumMessageExpiryInterval, pk)
}

// sessionEndsWithConnection reports whether the client's session ends when
// its connection does (MQTT 5 session expiry 0, MQTT 3.1.1 clean session).
// [iotq patch 22]
func (cl *Client) sessionEndsWithConnection() bool {
	return (cl.Properties.ProtocolVersion == 5 && cl.Properties.Props.SessionExpiryInterval == 0) || (cl.Properties.ProtocolVersion < 5 && cl.Properties.Clean)
}

// ClearInflights deletes all inflight messages for the client, e.g. for a disconnected user with a clean session.
//
// [iotq patch 22] One packet at a time: upstream copied the whole session
// first (GetAll), 53 MB for 65 535 messages, at the moment the client left.
func (cl *Client) ClearInflights() {
	for _, id := range cl.State.Inflight.IDs() {
		if tk, ok := cl.State.Inflight.Take(id); ok {
			cl.ops.hooks.OnQosDropped(cl, tk)
			atomic.AddInt64(&cl.ops.info.Inflight, -1)
		}
	}
	for _, rec := range cl.State.Inflight.inboundRecords() { // [iotq patch 56]
		if rec, ok := cl.State.Inflight.TakeInbound(rec.PacketID); ok {
			cl.ops.hooks.OnQosDropped(cl, rec)
			atomic.AddInt64(&cl.ops.info.Inflight, -1)
		}
	}
}

// ClearExpiredInflights deletes any inflight messages which have expired.
//
// [iotq patch 22] It looks at the expiry fields in place and copies out
// only the expired packets; upstream copied and sorted every packet of
// every session once a second (GetAll): 14 GB allocated in 100 s by one
// subscriber with 65 535 messages, and the store's lock held meanwhile.
func (cl *Client) ClearExpiredInflights(now, maximumExpiry int64) []uint16 {
	deleted := []uint16{}
	// If the maximum message expiry interval is set (greater than 0), and the message
	// retention period exceeds the maximum expiry, the message will be forcibly removed.
	for _, id := range cl.State.Inflight.expiredIDs(now, maximumExpiry) { // [MQTT-3.3.2-5]
		if tk, ok := cl.State.Inflight.Take(id); ok {
			cl.ops.hooks.OnQosDropped(cl, tk)
			atomic.AddInt64(&cl.ops.info.Inflight, -1)
			deleted = append(deleted, tk.PacketID)
		}
	}

	return deleted
}

// Read reads incoming packets from the connected client and transforms them into
// packets to be handled by the packetHandler.
//
// [iotq patch 14] It waits for the first byte of each packet here, with a
// small frame; readPacket, whose frame holds packets by value, runs once
// the packet has begun to arrive and returns before the next wait.
func (cl *Client) Read(packetHandler ReadFn) error {
	return cl.read(packetHandler, false)
}

// read is Read; a client that may park returns errParked when it gave its
// goroutine up, and resumed continues it. [iotq patch 18]
func (cl *Client) read(packetHandler ReadFn, resumed bool) (err error) {
	defer func() {
		// A parked client's batch was written before it parked, and the
		// goroutine that resumes it owns the batch now. [iotq patch 40]
		if !errors.Is(err, errParked) {
			cl.State.deliveries.end()
		}
	}()
	for {
		if !resumed { // a resumed client continues the wait it parked in
			if cl.Closed() {
				return nil
			}

			if cl.Net.bconn == nil {
				return ErrConnectionClosed
			}
			if cl.Net.bconn.buffered() == 0 && cl.Net.bconn.raw != nil {
				// Write what waits, then take what the socket holds
				// already: while a publisher streams it usually holds
				// more, and that read needs no deadline, no parking
				// and no wait. [iotq patch 46]
				cl.writeDeliveries()
				if err := cl.flushReplies(); err != nil {
					return err
				}
				cl.Net.bconn.fillNow()
			}
			// The keep-alive deadline matters only to a read that
			// blocks: it is refreshed before the buffer runs dry, and
			// every deadlineEvery packets while data keeps arriving (a
			// packet straddling the buffer's end reads from the
			// socket). Upstream set it per packet: time.Now and
			// SetReadDeadline were 7 % of the broker's CPU at 1 -> 1
			// QoS 0. [iotq patch 30]
			if cl.Net.bconn.buffered() == 0 || cl.State.sinceDeadline >= deadlineEvery {
				cl.State.sinceDeadline = 0
				expiry := cl.refreshDeadline(cl.State.Keepalive)
				if cl.park != nil {
					cl.park.expiry = expiry
				}
			} else {
				cl.State.sinceDeadline++
			}
		}
		resumed = false
		if cl.Net.bconn.buffered() == 0 {
			cl.writeDeliveries()                      // [iotq patch 40]
			if err := cl.flushReplies(); err != nil { // [iotq patch 31]
				return err
			}
		}
		var b byte
		var err error
		if cl.park != nil && cl.Net.bconn.buffered() == 0 {
			b, err = cl.waitOrPark()
		} else {
			b, err = cl.Net.bconn.ReadByte()
		}
		if err != nil {
			return err
		}
		cl.State.deliveries.begin() // [iotq patch 40]
		if err := cl.readPacket(b, packetHandler); err != nil {
			return err
		}
		if cl.park != nil && cl.Net.bconn.buffered() == 0 {
			cl.park.handled() // [iotq patch 39]
		}
	}
}

// readPacket reads the rest of the packet whose first byte is b and
// handles it. [iotq patch 14]
//
//go:noinline
func (cl *Client) readPacket(b byte, packetHandler ReadFn) (err error) {
	defer func() { // [iotq patch 19]
		if r := recover(); r != nil {
			err = cl.recovered(r, "handling a packet")
		}
	}()
	fh := new(packets.FixedHeader)
	if err := cl.decodeFixedHeader(b, fh); err != nil {
		cl.refuseMalformed(err)
		return err
	}

	pk, err := cl.ReadPacket(fh)
	if err != nil {
		cl.refuseMalformed(err)
		return err
	}

	return packetHandler(cl, pk) // Process inbound packet.
}

// clientPacketIDInUse reports whether the client's own packet identifier id
// is in use: an inbound QoS 2 exchange under id awaits the client's PUBREL.
// The server's identifiers for its outbound messages are a separate space
// (3.1.1 section 2.3.1, 5.0 section 2.2.1), though they share the in-flight
// map: upstream refused a SUBSCRIBE with 0x91 whenever a queued outbound
// message had its id. [iotq patch 20]
func (cl *Client) clientPacketIDInUse(id uint16) bool {
	return cl.State.Inflight.HasInbound(id) // [iotq patch 56]
}

// ReceiveMaximumExceededBy reports whether pk, a PUBLISH from the client,
// opens one QoS 2 exchange more than the server's Receive Maximum allows
// [MQTT-3.3.4-9]: QoS 1 messages are acknowledged at once. Resends (an
// identifier already in use) open none. [iotq patch 56] Upstream kept a
// running quota, which its handling of the server's own QoS 2 messages
// took from and gave back to as well.
func (cl *Client) ReceiveMaximumExceededBy(pk packets.Packet) bool {
	limit := atomic.LoadInt32(&cl.State.Inflight.maximumReceiveQuota)
	if pk.FixedHeader.Qos != 2 || cl.Net.Inline || limit <= 0 {
		return false
	}
	return cl.State.Inflight.InboundLen() >= int(limit) && !cl.State.Inflight.HasInbound(pk.PacketID)
}

// ClientExchange reports whether pk, as the engine passes it to the
// OnQosPublish, OnQosComplete and OnQosDropped hooks, is the record of
// one of the client's own QoS 2 exchanges (its PUBREC, under the client's
// packet identifier) rather than a message of the server's, under the
// server's: a store keeps the two apart. [iotq patch 56]
func ClientExchange(pk *packets.Packet) bool {
	return pk.FixedHeader.Type == packets.Pubrec
}

// Stop instructs the client to shut down all processing goroutines and disconnect.
func (cl *Client) Stop(err error) {
	cl.State.endOnce.Do(func() {

		if cl.Net.Conn != nil {
			_ = cl.Net.Conn.Close() // omit close error
		}

		if err != nil {
			cl.State.stopCause.Store(&err)
		}

		cl.State.ended.Store(true)

		atomic.StoreInt64(&cl.State.disconnected, time.Now().Unix())
		cl.wakeParked() // a parked client has no read to fail: continue it [iotq patch 18]
	})
}

// StopCause returns the reason the client connection was stopped, if any.
func (cl *Client) StopCause() error {
	if p := cl.State.stopCause.Load(); p != nil {
		return *p
	}
	return nil
}

// StopTime returns the the time the client disconnected in unix time, else zero.
func (cl *Client) StopTime() int64 {
	return atomic.LoadInt64(&cl.State.disconnected)
}

// HookSlots is the number of values hooks can attach to a client.
const HookSlots = 1

// Attach makes v the client's value in slot (0 <= slot < HookSlots), for
// a hook that looks its per-client state up on every packet: a field of
// the client costs no lookup and nothing shared between the readers of
// different clients, where a map of its own behind a lock cost both, and
// less memory per connection than a sync.Map. Each hook keeps to its own
// slot; Attach(slot, nil) clears it. [iotq patch 50]
func (cl *Client) Attach(slot int, v any) {
	if v == nil {
		cl.attached[slot].Store(nil)
		return
	}
	cl.attached[slot].Store(&v)
}

// Attached returns the client's value in slot, or nil.
func (cl *Client) Attached(slot int) any {
	if p := cl.attached[slot].Load(); p != nil {
		return *p
	}
	return nil
}

// Closed returns true if client connection is closed.
func (cl *Client) Closed() bool {
	return !cl.State.opened || cl.State.ended.Load()
}

func (cl *Client) IsTakenOver() bool {
	return cl.State.isTakenOver.Load()
}

// ReadFixedHeader reads in the values of the next packet's fixed header.
func (cl *Client) ReadFixedHeader(fh *packets.FixedHeader) error {
	if cl.Net.bconn == nil {
		return ErrConnectionClosed
	}

	b, err := cl.Net.bconn.ReadByte()
	if err != nil {
		return err
	}
	return cl.decodeFixedHeader(b, fh)
}

// decodeFixedHeader decodes the fixed header whose first byte is b.
// [iotq patch 14]
func (cl *Client) decodeFixedHeader(b byte, fh *packets.FixedHeader) error {
	err := fh.Decode(b)
	if err != nil {
		return err
	}

	var bu int
	fh.Remaining, bu, err = packets.DecodeLength(cl.Net.bconn)
	if err != nil {
		return err
	}

	if cl.ops.options.Capabilities.MaximumPacketSize > 0 && uint32(fh.Remaining+1) > cl.ops.options.Capabilities.MaximumPacketSize {
		return packets.ErrPacketTooLarge // [MQTT-3.2.2-15]
	}

	atomic.AddInt64(&cl.ops.info.BytesReceived, int64(bu+1))
	return nil
}

// ReadPacket reads the remaining buffer into an MQTT packet.
func (cl *Client) ReadPacket(fh *packets.FixedHeader) (pk packets.Packet, err error) {
	atomic.AddInt64(&cl.ops.info.PacketsReceived, 1)

	pk.ProtocolVersion = cl.Properties.ProtocolVersion // inherit client protocol version for decoding
	pk.FixedHeader = *fh
	p, n, err := readBody(cl.Net.bconn, pk.FixedHeader.Remaining, func(prefix []byte) error { // [iotq patch 23]
		return packets.PrefixError(pk.FixedHeader, pk.ProtocolVersion, prefix)
	})
	if err != nil {
		return pk, err
	}

	atomic.AddInt64(&cl.ops.info.BytesReceived, int64(n))

	// p is this packet's own slice (read fresh above), so it is decoded in
	// place: upstream copied it once more. [iotq patch 13]
	err = pk.DecodeBody(p)
	if err == nil && pk.FixedHeader.Type == packets.Publish {
		atomic.AddInt64(&cl.ops.info.MessagesReceived, 1)
	}

	if err != nil {
		return pk, err
	}

	pk, err = cl.ops.hooks.OnPacketRead(cl, pk)
	return
}

// bodyChunk is the largest packet body read into a buffer of its full
// size at once; a larger one is read into a buffer that grows fourfold
// each time it fills, so the buffer is at most four times what the client
// sent (doubling would copy more, and hold old and new buffer, 1.5 times
// the packet, at the last step; fourfold 1.25 times). [iotq patch 23]
const bodyChunk = 64 << 10

// readBody reads a packet body of size bytes from r. A body larger than
// bodyChunk gets memory as its bytes arrive, not as its fixed header
// announces them: upstream allocated the announced size (up to the
// maximum packet size) at once, so a connection that announced 16 MiB and
// sent 4 KiB held 16 MiB, and garbage sent instead of CONNECT made the
// broker allocate 3 GB in 10 s. Once the first bodyChunk bytes of a larger
// body are in, check tells whether the packet is bound to fail (too many
// properties, packets.PrefixError): then the rest is not read. n is the
// number of bytes read. [iotq patch 23]
func readBody(r io.Reader, size int, check func(prefix []byte) error) (p []byte, n int, err error) {
	p = make([]byte, min(size, bodyChunk))
	for {
		k, err := io.ReadFull(r, p[n:])
		n += k
		if err != nil || n == size {
			return p, n, err
		}
		if n == bodyChunk {
			if err := check(p); err != nil {
				return p, n, err
			}
		}
		grown := make([]byte, min(size, 4*len(p)))
		copy(grown, p[:n])
		p = grown
	}
}

// WritePacket encodes and writes a packet to the client.
func (cl *Client) WritePacket(pk packets.Packet) error {
	return cl.writePacket(pk, false)
}

// writeReply writes pk, an answer of the reader to the packet it just
// handled (PUBACK, PUBREC, PUBREL, PUBCOMP). While more input is buffered
// the answer only joins the output buffer, which the reader flushes before
// it waits for input (read) or once it is full: a publisher streaming QoS
// 1 messages gets its PUBACKs in a few writes rather than one system call
// each, which was a third of the broker's CPU at 1 -> 1 QoS 1. Called by
// the reader only. [iotq patch 31]
func (cl *Client) writeReply(pk packets.Packet) error {
	// Deliveries the reader will write first (patch 40) keep the answer
	// waiting with them: read flushes both before it waits.
	if cl.Net.bconn == nil || cl.Net.bconn.buffered() == 0 && !cl.State.deliveries.pending() {
		return cl.writePacket(pk, false)
	}
	cl.State.replyPending = true
	return cl.writePacket(pk, true)
}

// flushReplies writes the answers writeReply held back. Called by the
// reader only. [iotq patch 31]
func (cl *Client) flushReplies() error {
	if !cl.State.replyPending {
		return nil
	}
	cl.State.replyPending = false
	cl.Lock()
	defer cl.Unlock()
	return cl.flushOutbuf()
}

// writePacket is WritePacket; with hold, the packet waits in the output
// buffer (up to its size) for the next flush. [iotq patch 31]
func (cl *Client) writePacket(pk packets.Packet, hold bool) error {
	if cl.Closed() {
		return ErrConnectionClosed
	}

	if cl.Net.Conn == nil {
		return nil
	}

	buf := cl.ops.getBuffer() // [iotq patch 29]
	defer cl.ops.putBuffer(buf)
	var now unixNow
	if err := cl.encodePacket(&pk, buf, &now); err != nil {
		return err
	}
	// The hooks get the encoded packet even when buf.WriteTo below has
	// drained buf (upstream passed them the drained, empty buffer). The
	// bytes stay valid until buf goes back to the pool. [iotq patch 29]
	encoded := buf.Bytes()

	n, err := func() (int64, error) {
		cl.Lock()
		defer cl.Unlock()
		if hold { // [iotq patch 31]
			if cl.Net.outbuf == nil {
				cl.Net.outbuf = cl.ops.getBuffer() // [iotq patch 34]
			}
			n, _ := cl.Net.outbuf.Write(buf.Bytes())
			if cl.Net.outbuf.Len() < cl.ops.options.ClientNetWriteBufferSize {
				return int64(n), nil
			}
			return int64(n), cl.flushOutbuf()
		}
		if cl.State.outbound.Len() == 0 {
			if cl.Net.outbuf == nil {
				cl.State.deliveries.release() // about to wait on the socket [iotq patch 40]
				return buf.WriteTo(cl.Net.Conn)
			}

			// first write to buffer, then flush buffer
			n, _ := cl.Net.outbuf.Write(buf.Bytes()) // will always be successful
			return int64(n), cl.flushOutbuf()
		}

		// there are more writes in the queue
		if cl.Net.outbuf == nil {
			if buf.Len() >= cl.ops.options.ClientNetWriteBufferSize {
				cl.State.deliveries.release() // [iotq patch 40]
				return buf.WriteTo(cl.Net.Conn)
			}
			cl.Net.outbuf = cl.ops.getBuffer() // [iotq patch 34]
		}

		n, _ := cl.Net.outbuf.Write(buf.Bytes()) // will always be successful
		if cl.Net.outbuf.Len() < cl.ops.options.ClientNetWriteBufferSize {
			return int64(n), nil
		}

		return int64(n), cl.flushOutbuf()
	}()
	if err != nil {
		return err
	}

	cl.countSent(&pk, n, encoded)
	return nil
}

// receivedAt returns when the packet the reader handles arrived, in Unix
// seconds: the time of the read that brought its last bytes. Upstream
// read the clock for each PUBLISH; with encodePacket's reading that was
// 5 % of the broker's CPU at 1 -> 1 QoS 0. [iotq patch 45]
func (cl *Client) receivedAt() int64 {
	if cl.Net.bconn != nil && cl.Net.bconn.readAt != 0 {
		return cl.Net.bconn.readAt
	}
	return time.Now().Unix()
}

// unixNow is the time in Unix seconds, read from the clock when first
// asked: one reading for the packets encoded in one batch. [iotq patch 45]
type unixNow int64

func (t *unixNow) get() int64 {
	if *t == 0 {
		*t = unixNow(time.Now().Unix())
	}
	return int64(*t)
}

// encodePacket prepares pk for cl (expiry, protocol version, the
// encoder's limits, the OnPacketEncode hook) and appends its encoding to
// buf. A packet over the client's Maximum Packet Size leaves buf as it
// was. now gives the time the remaining expiry interval counts from.
// [iotq patch 40: split from writePacket; 45: now]
func (cl *Client) encodePacket(pk *packets.Packet, buf *bytes.Buffer, now *unixNow) error {
	// Only a message that carries a Message Expiry Interval is sent with
	// one, what is left of it [MQTT-3.3.2-6]; "if absent, the Application
	// Message does not expire". Upstream also gave every other message the
	// server's MaximumMessageExpiryInterval (a day by default), which then
	// reached subscribers as the publisher's. [iotq patch 58]
	if pk.Expiry > 0 && pk.Properties.MessageExpiryInterval > 0 {
		expiry := pk.Expiry - now.get()
		if expiry < 1 {
			expiry = 1
		}
		pk.Properties.MessageExpiryInterval = uint32(expiry) // [MQTT-3.3.2-6]
	}

	pk.ProtocolVersion = cl.Properties.ProtocolVersion
	if pk.Mods.MaxSize == 0 { // NB we use this statement to embed client packet sizes in tests
		pk.Mods.MaxSize = cl.Properties.Props.MaximumPacketSize
	}

	if cl.Properties.Props.RequestProblemInfoFlag && cl.Properties.Props.RequestProblemInfo == 0x0 {
		pk.Mods.DisallowProblemInfo = true // [MQTT-3.1.2-29] strict, no problem info on any packet if set
	}

	if pk.FixedHeader.Type != packets.Connack || cl.Properties.Props.RequestResponseInfo == 0x1 || cl.ops.options.Capabilities.Compatibilities.AlwaysReturnResponseInfo {
		pk.Mods.AllowResponseInfo = true // [MQTT-3.1.2-28] we need to know which properties we can encode
	}

	if cl.ops.hooks.Provides(OnPacketEncode) {
		*pk = cl.ops.hooks.OnPacketEncode(cl, *pk)
	}

	start := buf.Len()
	var err error
	switch pk.FixedHeader.Type {
	case packets.Connect:
		err = pk.ConnectEncode(buf)
	case packets.Connack:
		err = pk.ConnackEncode(buf)
	case packets.Publish:
		if pk.Shareable() && !cl.ops.hooks.Provides(OnPacketEncode) { // [iotq patch 16]
			err = pk.Shared.Encode(pk, buf)
		} else {
			err = pk.PublishEncode(buf)
		}
	case packets.Puback:
		err = pk.PubackEncode(buf)
	case packets.Pubrec:
		err = pk.PubrecEncode(buf)
	case packets.Pubrel:
		err = pk.PubrelEncode(buf)
	case packets.Pubcomp:
		err = pk.PubcompEncode(buf)
	case packets.Subscribe:
		err = pk.SubscribeEncode(buf)
	case packets.Suback:
		err = pk.SubackEncode(buf)
	case packets.Unsubscribe:
		err = pk.UnsubscribeEncode(buf)
	case packets.Unsuback:
		err = pk.UnsubackEncode(buf)
	case packets.Pingreq:
		err = pk.PingreqEncode(buf)
	case packets.Pingresp:
		err = pk.PingrespEncode(buf)
	case packets.Disconnect:
		err = pk.DisconnectEncode(buf)
	case packets.Auth:
		err = pk.AuthEncode(buf)
	default:
		err = fmt.Errorf("%w: %v", packets.ErrNoValidPacketAvailable, pk.FixedHeader.Type)
	}
	if err == nil && pk.Mods.MaxSize > 0 && uint32(buf.Len()-start) > pk.Mods.MaxSize {
		err = packets.ErrPacketTooLarge // [MQTT-3.1.2-24] [MQTT-3.1.2-25]
	}
	if err != nil {
		buf.Truncate(start)
	}
	return err
}

// countSent accounts for pk, of which n bytes were written or buffered,
// and tells the hooks. [iotq patch 40: split from writePacket]
func (cl *Client) countSent(pk *packets.Packet, n int64, encoded []byte) {
	atomic.AddInt64(&cl.ops.info.BytesSent, n)
	atomic.AddInt64(&cl.ops.info.PacketsSent, 1)
	if pk.FixedHeader.Type == packets.Publish {
		atomic.AddInt64(&cl.ops.info.MessagesSent, 1)
	}

	cl.ops.hooks.OnPacketSent(cl, *pk, encoded)
}

func (cl *Client) flushOutbuf() (err error) {
	if cl.Net.outbuf == nil {
		return
	}
	cl.State.deliveries.release() // about to wait on the socket [iotq patch 40]

	_, err = cl.Net.outbuf.WriteTo(cl.Net.Conn)
	if err == nil {
		cl.ops.putBuffer(cl.Net.outbuf) // [iotq patch 34]
		cl.Net.outbuf = nil
	}
	return
}
