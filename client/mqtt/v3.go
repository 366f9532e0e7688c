package mqtt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"syscall"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/iotq/iotq/client/internal/core"
	"github.com/iotq/iotq/transport/endpoint"
)

// v3Client is MQTT 3.1.1 over paho.mqtt.golang.
type v3Client struct {
	lifecycle
	ep   endpoint.Endpoint
	o    core.Options
	pc   paho.Client
	conn *timedConn
	in   *inbox

	sessionPresent bool
	wg             sync.WaitGroup // receipt watchers
	closeOnce      sync.Once
	// handover (capacity 1) lets one paho Publish call run at a time, in
	// call order. See Publish.
	handover chan struct{}
}

func dialV3(ctx context.Context, ep endpoint.Endpoint, o core.Options) (core.Client, error) {
	// The inbox exists before CONNECT: a persistent session's messages
	// come right behind the CONNACK.
	c := &v3Client{lifecycle: newLifecycle(), ep: ep, o: o, handover: make(chan struct{}, 1), in: newInbox(o.Logger, maxHeld, maxHeldBytes)}
	// The transport is dialled on paho's goroutine (the open function);
	// mu guards what it leaves behind, dialDone closes when it returned.
	var (
		mu       sync.Mutex
		dialErr  error
		dialled  bool
		dialDone = make(chan struct{})
	)
	dialResult := func() (*timedConn, error) {
		mu.Lock()
		defer mu.Unlock()
		return c.conn, dialErr
	}
	po := paho.NewClientOptions()
	po.AddBroker(ep.String())
	po.SetClientID(o.ClientID)
	po.SetUsername(o.Username)
	po.SetPassword(o.Password)
	po.SetCleanSession(!o.PersistentSession)
	po.SetKeepAlive(o.KeepAlive)
	po.SetPingTimeout(max(10*time.Second, o.KeepAlive/2))
	po.SetProtocolVersion(4)
	po.SetAutoReconnect(false)
	po.SetConnectRetry(false)
	po.SetResumeSubs(false)
	// paho calls the default handler in arrival order from one goroutine
	// (the inbox relies on that) and never acknowledges by itself: the
	// inbox calls Ack once the application's handler had the message.
	po.SetOrderMatters(true)
	po.SetAutoAckDisabled(true)
	po.SetConnectTimeout(o.ConnectTimeout)
	po.SetWriteTimeout(o.AckTimeout)
	if o.Will != nil {
		po.SetBinaryWill(o.Will.Topic, o.Will.Payload, o.Will.QoS, o.Will.Retain)
	}
	po.SetCustomOpenConnectionFn(func(*url.URL, paho.ClientOptions) (net.Conn, error) {
		mu.Lock()
		if dialled {
			mu.Unlock()
			return nil, errors.New("reconnect disabled")
		}
		dialled = true
		mu.Unlock()
		defer close(dialDone)
		tc, err := dial(ctx, ep, o)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			dialErr = err
			return nil, err
		}
		c.conn = tc
		return tc, nil
	})
	po.SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) {
		now := time.Now()
		var ack func()
		if m.Qos() > 0 {
			ack = m.Ack
		}
		c.in.deliver(core.Message{
			Topic: m.Topic(), Payload: m.Payload(), QoS: m.Qos(), Retained: m.Retained(), Received: now,
		}, ack)
	})
	po.SetConnectionLostHandler(func(_ paho.Client, err error) {
		if c.closeReq.Load() {
			c.end(core.ErrClosed)
			return
		}
		c.end(fmt.Errorf("%w: %w", core.ErrConnectionLost, err)) // %w: refusedHint looks for io.EOF
	})
	c.pc = paho.NewClient(po)
	tok := c.pc.Connect()
	select {
	case <-tok.Done():
	case <-ctx.Done():
		// A dial still under way ends with ctx: wait for it (bounded), so
		// that a transport that never answered is reported as such (its
		// *transport.DialError, with its one hint).
		mu.Lock()
		started := dialled
		mu.Unlock()
		if started {
			t := time.NewTimer(5 * time.Second)
			select {
			case <-dialDone:
			case <-t.C:
			}
			t.Stop()
		}
		c.in.stop()
		c.pc.Disconnect(0)
		conn, derr := dialResult()
		if derr != nil {
			return nil, derr
		}
		if conn != nil {
			conn.finish()
		}
		return nil, fmt.Errorf("connect %s: no CONNACK within the connect timeout: %w (check that the port serves MQTT and the transport scheme matches)", ep, ctx.Err())
	}
	if err := tok.Error(); err != nil {
		c.in.stop()
		conn, derr := dialResult()
		if derr != nil {
			return nil, derr
		}
		if conn != nil {
			conn.finish()
		}
		return nil, connectHintV3(ep, err)
	}
	if ct, ok := tok.(*paho.ConnectToken); ok {
		c.sessionPresent = ct.SessionPresent()
	}
	o.Logger.Debug("connected", "url", ep, "protocol", "mqtt/3.1.1", "client_id", o.ClientID)
	return c, nil
}

// connectHintV3 explains a refused or failed MQTT 3.1.1 connect.
func connectHintV3(u endpoint.Endpoint, err error) error {
	switch {
	case errors.Is(err, packets.ErrorRefusedBadUsernameOrPassword), errors.Is(err, packets.ErrorRefusedNotAuthorised):
		return fmt.Errorf("connect %s: broker refused: %w (check --username/--password)", u, err)
	case errors.Is(err, packets.ErrorRefusedIDRejected):
		return fmt.Errorf("connect %s: broker refused: %w (check --client-id)", u, err)
	case errors.Is(err, packets.ErrorRefusedBadProtocolVersion):
		return fmt.Errorf("connect %s: broker refused: %w (try --protocol 5 or 3)", u, err)
	}
	if core.PeerSaidWhy(err) {
		return fmt.Errorf("connect %s: %w", u, err)
	}
	return fmt.Errorf("connect %s: %w (check that the port serves MQTT and the transport scheme matches)", u, err)
}

func (c *v3Client) Publish(ctx context.Context, topic string, payload []byte, opts core.PublishOptions) (*core.Receipt, error) {
	if err := core.CheckPublishExtras("MQTT 3.1.1", opts, false, false); err != nil {
		return nil, err
	}
	if err := checkPublish(topic, payload, opts.QoS); err != nil {
		return nil, err
	}
	if err := c.ended("publish " + topic); err != nil {
		return nil, err
	}
	tok, err := c.handOver(topic, payload, opts)
	if err != nil {
		return nil, err
	}
	r, complete := core.NewReceipt()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		select {
		case <-tok.Done():
			now := time.Now()
			if err := tok.Error(); err != nil {
				complete(now, fmt.Errorf("publish %s: %w", topic, c.refusedHint(opts.QoS, len(payload), c.tokenErr(err))))
				return
			}
			complete(now, nil)
		case <-c.done:
			complete(time.Now(), fmt.Errorf("publish %s: %w", topic, c.refusedHint(opts.QoS, len(payload), c.endReason())))
		}
	}()
	return r, nil
}

// handOver passes one message to paho. paho's Publish can block for its
// whole WriteTimeout (AckTimeout) when the connection dies between its
// "connected" check and the hand-over to its writer, whose goroutine is
// gone by then. So the call runs on a goroutine of its own, one at a time
// and in order (handover), and handOver returns as soon as the connection
// has ended. A call stuck that way ends by itself within WriteTimeout; it
// is the only goroutine of the client that Close does not wait for, as
// paho offers no way to interrupt it.
func (c *v3Client) handOver(topic string, payload []byte, opts core.PublishOptions) (paho.Token, error) {
	lost := func() error {
		if err := c.Err(); err != nil {
			return fmt.Errorf("publish %s: %w", topic, err)
		}
		return fmt.Errorf("publish %s: %w", topic, core.ErrClosed)
	}
	select {
	case c.handover <- struct{}{}:
	case <-c.done:
		return nil, lost()
	}
	tokc := make(chan paho.Token, 1)
	go func() {
		defer func() { <-c.handover }()
		tokc <- c.pc.Publish(topic, opts.QoS, opts.Retain, payload)
	}()
	select {
	case tok := <-tokc:
		return tok, nil
	case <-c.done:
		return nil, lost()
	}
}

// refusedHint adds to err, when a QoS 1 or 2 publish failed because the
// broker closed the connection before acknowledging it, that the broker's
// ACL (or its packet size limit) probably refused it. MQTT 3.1.1 has no reason codes: a broker can
// only drop a refused publish silently (Mosquitto acknowledges it) or close
// the connection (iotq broker); a close by the broker (end of stream or a
// reset), not a timeout, is what points at a refusal.
func (c *v3Client) refusedHint(qos byte, size int, err error) error {
	if qos == 0 || !errors.Is(err, core.ErrConnectionLost) {
		return err
	}
	// paho fails the token before it reports the lost connection.
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		return err
	}
	cause := c.Err()
	if !errors.Is(cause, io.EOF) && !errors.Is(cause, io.ErrUnexpectedEOF) && !errors.Is(cause, syscall.ECONNRESET) {
		return err
	}
	return fmt.Errorf("%w: the broker closed the connection before acknowledging this QoS %d message (payload %d bytes); "+
		"if the broker is still running, it was probably refused by the broker's ACL, or is past its maximum packet size "+
		"(MQTT 3.1.1 has no reason codes: iotq broker closes the connection on a refused publish, other brokers may drop it silently); "+
		"check the ACL for this user and topic, or publish with MQTT 5 (--protocol 5) to get the reason code", err, qos, size)
}

// endReason is the error for receipts pending when the connection ended.
func (c *v3Client) endReason() error {
	if c.closeReq.Load() {
		return core.ErrClosed
	}
	return core.ErrConnectionLost
}

func (c *v3Client) Subscribe(ctx context.Context, filter string, opts core.SubscribeOptions, h core.Handler) error {
	if err := checkSubscribe(filter, opts.QoS); err != nil {
		return err
	}
	if err := c.ended("subscribe " + filter); err != nil {
		return err
	}
	c.in.subscribe(filter, h)
	tok := c.pc.Subscribe(filter, opts.QoS, nil)
	tctx, cancel := context.WithTimeout(ctx, c.o.AckTimeout)
	defer cancel()
	select {
	case <-tok.Done():
	case <-tctx.Done():
		return fmt.Errorf("subscribe %s: no SUBACK: %w", filter, tctx.Err())
	case <-c.done:
		return fmt.Errorf("subscribe %s: %w", filter, c.endReason())
	}
	if err := tok.Error(); err != nil {
		if e := c.ended("subscribe " + filter); e != nil {
			return fmt.Errorf("%w (%v)", e, err)
		}
		return fmt.Errorf("subscribe %s: %w", filter, err)
	}
	if st, ok := tok.(*paho.SubscribeToken); ok {
		for f, q := range st.Result() {
			if q == 0x80 {
				return fmt.Errorf("subscribe %s: broker refused the subscription (check the ACL for this user and topic)", f)
			}
		}
	}
	return nil
}

func (c *v3Client) ConnectionInfo() core.ConnectionInfo {
	return infoFrom(c.ep, c.conn, "mqtt/3.1.1", c.o.ClientID, c.sessionPresent)
}

func (c *v3Client) Close() error {
	c.closeOnce.Do(func() {
		c.closeReq.Store(true)
		// Handlers first: what they had is acknowledged before the
		// DISCONNECT, and paho's receiving goroutine, which may wait for
		// the inbox, can stop.
		c.in.stop()
		if c.pc.IsConnected() {
			c.pc.Disconnect(250)
		}
		c.end(core.ErrClosed)
		c.wg.Wait()
		if c.conn != nil {
			c.conn.finish()
		}
	})
	return nil
}

// tokenErr maps paho's token errors onto the common sentinels. paho does
// not export its "connection lost before ... completed" error; it completes
// tokens with it only after the connection's status left "connected", so
// the connection's state (never the error's text) tells.
func (c *v3Client) tokenErr(err error) error {
	switch {
	case errors.Is(err, paho.ErrNotConnected), !c.pc.IsConnectionOpen():
		if c.closeReq.Load() {
			return core.ErrClosed
		}
		return fmt.Errorf("%w (%v)", core.ErrConnectionLost, err)
	}
	return err
}
