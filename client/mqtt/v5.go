package mqtt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	"github.com/eclipse/paho.golang/paho/session"
	"github.com/eclipse/paho.golang/paho/session/state"

	"github.com/iotq/iotq/client/internal/core"
	"github.com/iotq/iotq/transport/endpoint"
)

// v5Client is MQTT 5.0 over paho.golang.
type v5Client struct {
	lifecycle
	ep   endpoint.Endpoint
	o    core.Options
	pc   *paho.Client
	conn *timedConn
	st   *sessionTap
	in   *inbox

	sessionPresent bool
	clientID       string
	maxPacket      uint32 // the broker's Maximum Packet Size from CONNACK; 0: none given

	pubMu     sync.Mutex     // serialises Publish so packets leave in call order
	wg        sync.WaitGroup // receipt watchers and the done watcher
	closeOnce sync.Once
}

// sessionTap wraps paho's in-memory session so that a QoS 1/2 Publish can be
// sent asynchronously (in call order) while its acknowledgement still
// completes a Receipt: AddToSession is called synchronously inside
// PublishWithOptions, where the publisher has left the pending completion.
type sessionTap struct {
	*state.State
	c       *v5Client
	pending func(time.Time, error) // set by Publish, pubMu held
	topic   string
}

func (s *sessionTap) AddToSession(ctx context.Context, p session.Packet, resp chan<- packets.ControlPacket) error {
	if p.Type() != packets.PUBLISH || s.pending == nil {
		return s.State.AddToSession(ctx, p, resp)
	}
	complete, topic := s.pending, s.topic
	s.pending = nil
	ch := make(chan packets.ControlPacket, 1)
	if err := s.State.AddToSession(ctx, p, ch); err != nil {
		return err
	}
	s.c.wg.Add(1)
	go func() {
		defer s.c.wg.Done()
		// paho answers on ch when the ack arrives, but forgets pending
		// packets of a clean session when the connection drops, so the end
		// of the connection fails the receipt too (an ack that is already
		// there wins).
		var cp packets.ControlPacket
		select {
		case cp = <-ch:
		case <-s.c.done:
			select {
			case cp = <-ch:
			default:
			}
		}
		now := time.Now()
		switch x := cp.Content.(type) {
		case *packets.Puback:
			if x.ReasonCode >= 0x80 {
				complete(now, fmt.Errorf("publish %s: broker refused: %s (reason 0x%02x; check the ACL)", topic, x.Reason(), x.ReasonCode))
				return
			}
			complete(now, nil)
		case *packets.Pubcomp:
			if x.ReasonCode >= 0x80 {
				complete(now, fmt.Errorf("publish %s: PUBCOMP reason 0x%02x: %s", topic, x.ReasonCode, x.Reason()))
				return
			}
			complete(now, nil)
		case *packets.Pubrec:
			complete(now, fmt.Errorf("publish %s: broker refused: %s (reason 0x%02x; check the ACL)", topic, x.Reason(), x.ReasonCode))
		default:
			complete(now, fmt.Errorf("publish %s: %w", topic, s.c.endReason()))
		}
	}()
	return nil
}

// Ack is what paho calls right after OnPublishReceived returned, when the
// application's handler may not have had the message yet (it may wait in
// the inbox for a Subscribe). So it sends nothing: the inbox acknowledges
// through State.Ack once the handler had the message. (paho's manual
// acknowledgement mode would do too, but it sends on a 50 ms ticker and
// drops what is still due when the client disconnects, so a persistent
// session would get those messages again.)
func (s *sessionTap) Ack(*packets.Publish) error { return nil }

func dialV5(ctx context.Context, ep endpoint.Endpoint, o core.Options) (core.Client, error) {
	tc, err := dial(ctx, ep, o)
	if err != nil {
		return nil, err
	}
	// The inbox exists before CONNECT: a persistent session's messages
	// come right behind the CONNACK.
	c := &v5Client{lifecycle: newLifecycle(), ep: ep, o: o, conn: tc, clientID: o.ClientID, in: newInbox(o.Logger, maxHeld, maxHeldBytes)}
	c.st = &sessionTap{State: state.NewInMemory(), c: c}
	c.pc = paho.NewClient(paho.ClientConfig{
		ClientID:      o.ClientID,
		Conn:          &packetConn{timedConn: tc},
		Session:       c.st,
		PacketTimeout: o.AckTimeout,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){
			func(pr paho.PublishReceived) (bool, error) {
				now := time.Now()
				p := pr.Packet
				var ack func()
				if p.QoS > 0 {
					pkt := p.Packet()
					ack = func() { _ = c.st.State.Ack(pkt) }
				}
				c.in.deliver(core.Message{Topic: p.Topic, Payload: p.Payload, QoS: p.QoS, Retained: p.Retain, Received: now}, ack)
				return true, nil
			},
		},
		OnServerDisconnect: func(d *paho.Disconnect) {
			reason := ""
			if d.Properties != nil {
				reason = d.Properties.ReasonString
			}
			c.end(fmt.Errorf("%w: broker sent DISCONNECT reason 0x%02x %s", core.ErrConnectionLost, d.ReasonCode, reason))
		},
		OnClientError: func(err error) {
			if c.closeReq.Load() {
				c.end(core.ErrClosed) // the error comes from our own Close
				return
			}
			c.end(fmt.Errorf("%w: %v", core.ErrConnectionLost, err))
		},
	})
	cp := &paho.Connect{
		ClientID:   o.ClientID,
		KeepAlive:  uint16(o.KeepAlive / time.Second),
		CleanStart: !o.PersistentSession,
	}
	if o.Username != "" {
		cp.Username, cp.UsernameFlag = o.Username, true
	}
	if o.Password != "" {
		cp.Password, cp.PasswordFlag = []byte(o.Password), true
	}
	if o.PersistentSession {
		exp := uint32(min(o.SessionExpiry/time.Second, 0xFFFFFFFE))
		cp.Properties = &paho.ConnectProperties{SessionExpiryInterval: &exp}
	}
	if o.Will != nil {
		cp.WillMessage = &paho.WillMessage{Topic: o.Will.Topic, Payload: o.Will.Payload, QoS: o.Will.QoS, Retain: o.Will.Retain}
	}
	ca, err := c.pc.Connect(ctx, cp)
	if err != nil {
		c.in.stop()
		tc.finish()
		_ = c.st.Close()
		return nil, connectHintV5(ep, ca, err)
	}
	c.sessionPresent = ca.SessionPresent
	if ca.Properties != nil && ca.Properties.AssignedClientID != "" {
		c.clientID = ca.Properties.AssignedClientID
	}
	if ca.Properties != nil && ca.Properties.MaximumPacketSize != nil {
		c.maxPacket = *ca.Properties.MaximumPacketSize
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		<-c.pc.Done()
		c.end(c.endReason())
		_ = c.st.Close() // fails pending receipts
	}()
	o.Logger.Debug("connected", "url", ep, "protocol", "mqtt/5", "client_id", c.clientID)
	return c, nil
}

// connectHintV5 explains a refused or failed MQTT 5 connect.
func connectHintV5(u endpoint.Endpoint, ca *paho.Connack, err error) error {
	if ca != nil && ca.ReasonCode >= 0x80 {
		hint := "check the broker's log"
		switch ca.ReasonCode {
		case 0x86, 0x87, 0x8C:
			hint = "check --username/--password"
		case 0x85:
			hint = "check --client-id"
		case 0x84:
			hint = "the broker does not speak MQTT 5: try --protocol 3"
		}
		return fmt.Errorf("connect %s: broker refused with reason 0x%02x: %w (%s)", u, ca.ReasonCode, err, hint)
	}
	if core.PeerSaidWhy(err) {
		return fmt.Errorf("connect %s: %w", u, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("connect %s: no CONNACK in time: %w (check that the port serves MQTT and the transport scheme matches)", u, err)
	}
	return fmt.Errorf("connect %s: %w (check that the port serves MQTT 5 and the transport scheme matches; an MQTT 3.1.1-only broker closes the connection: try --protocol 3)", u, err)
}

// endReason is the error for receipts pending when the connection ended.
func (c *v5Client) endReason() error {
	if c.closeReq.Load() {
		return core.ErrClosed
	}
	return core.ErrConnectionLost
}

func (c *v5Client) Publish(ctx context.Context, topic string, payload []byte, opts core.PublishOptions) (*core.Receipt, error) {
	if err := core.CheckPublishExtras("MQTT 5", opts, false, false); err != nil {
		return nil, err
	}
	if err := checkPublish(topic, payload, opts.QoS); err != nil {
		return nil, err
	}
	// A broker closes the connection on a packet past the Maximum Packet
	// Size of its CONNACK [MQTT-3.1.2-24 for the other direction]; say so
	// before sending rather than report a lost connection.
	if n := publishPacketSize(topic, payload, opts.QoS); c.maxPacket > 0 && n > int(c.maxPacket) {
		return nil, fmt.Errorf("publish %s: a PUBLISH of %d bytes (payload %d) is past the broker's maximum packet size of %d bytes (its CONNACK)", topic, n, len(payload), c.maxPacket)
	}
	if err := c.ended("publish " + topic); err != nil {
		return nil, err
	}
	r, complete := core.NewReceipt()
	p := &paho.Publish{Topic: topic, QoS: opts.QoS, Retain: opts.Retain, Payload: payload}
	c.pubMu.Lock()
	defer c.pubMu.Unlock()
	if opts.QoS == 0 {
		if _, err := c.pc.PublishWithOptions(ctx, p, paho.PublishOptions{}); err != nil {
			return nil, fmt.Errorf("publish %s: %w", topic, c.publishErr(err))
		}
		complete(time.Now(), nil)
		return r, nil
	}
	c.st.pending, c.st.topic = complete, topic
	_, err := c.pc.PublishWithOptions(ctx, p, paho.PublishOptions{Method: paho.PublishMethod_AsyncSend})
	added := c.st.pending == nil
	c.st.pending = nil
	if err != nil && !added {
		return nil, fmt.Errorf("publish %s: %w", topic, c.publishErr(err))
	}
	// Stored in the session: the receipt completes on the ack, or fails
	// when the session closes (a write error ends the connection).
	return r, nil
}

func (c *v5Client) Subscribe(ctx context.Context, filter string, opts core.SubscribeOptions, h core.Handler) error {
	if err := checkSubscribe(filter, opts.QoS); err != nil {
		return err
	}
	if err := c.ended("subscribe " + filter); err != nil {
		return err
	}
	c.in.subscribe(filter, h)
	sa, err := c.pc.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: opts.QoS}}})
	if err != nil {
		if e := c.ended("subscribe " + filter); e != nil {
			return fmt.Errorf("%w (%v)", e, err)
		}
		return fmt.Errorf("subscribe %s: %w", filter, err)
	}
	for _, rc := range sa.Reasons {
		if rc >= 0x80 {
			return fmt.Errorf("subscribe %s: broker refused with reason 0x%02x (check the ACL for this user and topic)", filter, rc)
		}
	}
	return nil
}

func (c *v5Client) ConnectionInfo() core.ConnectionInfo {
	return infoFrom(c.ep, c.conn, "mqtt/5", c.clientID, c.sessionPresent)
}

func (c *v5Client) Close() error {
	c.closeOnce.Do(func() {
		c.closeReq.Store(true)
		// Handlers first: what they had is acknowledged before the
		// DISCONNECT, and paho's receiving goroutine, which may wait for
		// the inbox, can stop.
		c.in.stop()
		select {
		case <-c.pc.Done():
		default:
			_ = c.pc.Disconnect(&paho.Disconnect{ReasonCode: 0})
		}
		c.end(core.ErrClosed)
		c.conn.finish()
		// Wait for a Publish in progress, then fail what is still pending.
		c.pubMu.Lock()
		_ = c.st.Close()
		c.pubMu.Unlock()
		c.wg.Wait()
	})
	return nil
}

// publishErr maps a failed hand-over onto the common sentinels: a write
// error or a session without connection means the connection is gone.
func (c *v5Client) publishErr(err error) error {
	if errors.Is(err, paho.ErrInvalidArguments) || errors.Is(err, session.ErrPacketIdentifiersExhausted) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if c.closeReq.Load() {
		return core.ErrClosed
	}
	return fmt.Errorf("%w (%v)", core.ErrConnectionLost, err)
}
