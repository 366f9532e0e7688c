package amqp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/iotq/iotq/client/internal/core"
	"github.com/iotq/iotq/transport"
	"github.com/iotq/iotq/transport/endpoint"
)

// Errors of this package.
var (
	// ErrQoS2: AMQP brokers here offer no exactly-once delivery.
	ErrQoS2 = errors.New("QoS 2 (exactly once) is not available over AMQP 1.0; use 0 (pre-settled) or 1 (at least once)")
	// ErrWildcard: AMQP addresses have no MQTT wildcards; a broker's own
	// wildcard syntax is passed through only where the client knows it
	// (ActiveMQ Artemis: # and * between . separators).
	ErrWildcard = errors.New("AMQP addresses have no MQTT wildcards (+, #); subscribe to the exact address")
	// ErrNotDurable: the broker answered a durable subscription
	// (Options.PersistentSession) with a source it does not keep.
	ErrNotDurable = errors.New("the broker does not keep this subscription while the client is away (its attach answered durable none or an expiry other than never)")
)

// ProductArtemis is the product property of ActiveMQ Artemis's open frame.
const ProductArtemis = "apache-activemq-artemis"

// DefaultCredit is the link credit of a receiver.
const DefaultCredit = 100

// client is one AMQP connection with one session.
type client struct {
	ep      endpoint.Endpoint
	o       core.Options
	prefix  string
	credit  int32
	tc      transport.Conn
	cache   *transport.FileSessionCache
	conn    *goamqp.Conn
	session *goamqp.Session
	tap     *attachTap
	product string // the broker's open properties: product

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex // guards senders, info, closed, err
	senders  map[string]*goamqp.Sender
	info     core.ConnectionInfo
	closed   bool
	err      error
	done     chan struct{}
	doneOnce sync.Once

	deliveries chan delivery
	quit       chan struct{} // closed by Close: dispatch stops after the delivery in hand
	dispatched chan struct{} // closed when dispatch returned
	closeOnce  sync.Once
	closeErr   error
}

type delivery struct {
	r   *goamqp.Receiver
	msg *goamqp.Message
	qos byte
	h   core.Handler
	at  time.Time
	to  string // the link's address, for messages without a to
}

func randomID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Dial connects to the AMQP broker at ep (amqp, amqps or amqp+quic) and
// returns once the AMQP connection and a session are open.
func Dial(ctx context.Context, ep endpoint.Endpoint, o core.Options) (cl core.Client, err error) {
	if o.Early != nil {
		defer func() {
			if err != nil { // the first call wins: a receipt already failed stays so
				o.Early.Complete(time.Now(), fmt.Errorf("early publish %s: %w", o.Early.Topic, err))
			}
		}()
	}
	if o.PersistentSession && o.ClientID == "" {
		return nil, fmt.Errorf("dial %s: a persistent session (durable subscriptions) needs a client id: the broker finds a durable subscription again by container id and link name (--client-id)", ep)
	}
	o = o.WithDefaults(randomID)
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ctx, cancelDial := context.WithTimeout(ctx, o.ConnectTimeout)
	defer cancelDial()
	opts := ep.Options()
	c := &client{ep: ep, o: o, prefix: opts.Get("prefix"), credit: DefaultCredit, senders: map[string]*goamqp.Sender{},
		done: make(chan struct{}), deliveries: make(chan delivery, 256),
		quit: make(chan struct{}), dispatched: make(chan struct{})}
	if v := opts.Get("credit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1<<20 {
			return nil, fmt.Errorf("dial %s: option credit=%q: want 1 to 1048576", ep, v)
		}
		c.credit = int32(n)
	}
	var sasl goamqp.SASLType
	mech := ""
	switch s := opts.Get("sasl"); {
	case s == "none":
	case s == "plain" || (s == "" && o.Username != ""):
		sasl, mech = goamqp.SASLTypePlain(o.Username, o.Password), "PLAIN"
	case s == "anonymous" || s == "":
		sasl, mech = goamqp.SASLTypeAnonymous(), "ANONYMOUS"
	default:
		return nil, fmt.Errorf("dial %s: option sasl=%q: want anonymous, plain or none", ep, s)
	}
	var es *earlyStart
	if e := o.Early; e != nil {
		if e.Retain {
			return nil, fmt.Errorf("dial %s: early message: retain: AMQP 1.0 has no retained messages", ep)
		}
		if err := c.check(e.Topic, e.QoS); err != nil {
			return nil, fmt.Errorf("dial %s: early message: %w", ep, err)
		}
		es = &earlyStart{sasl: mech, username: o.Username, password: o.Password, containerID: o.ClientID,
			hostname: ep.Host, idleTimeout: 2 * o.KeepAlive, linkName: "iotq-early-" + randomID(),
			address: c.address(e.Topic), tag: make([]byte, 8), payload: e.Payload, settled: e.QoS == 0}
	}
	start := time.Now()
	tc, cache, err := core.DialTransport(ctx, ep, o)
	if err != nil {
		return nil, err
	}
	c.tc, c.cache = tc, cache
	var nc net.Conn = tc
	var pc *pipeConn
	if es != nil {
		if pc, err = c.pipeline(tc, es); err != nil {
			_ = tc.Close()
			_ = cache.Close()
			return nil, fmt.Errorf("dial %s: %w", ep, err)
		}
		nc = pc
	}
	c.tap = newAttachTap(nc)
	nc = c.tap
	conn, err := goamqp.NewConn(ctx, nc, &goamqp.ConnOptions{
		ContainerID:  o.ClientID,
		HostName:     ep.Host,
		IdleTimeout:  2 * o.KeepAlive,
		MaxFrameSize: maxFrameSize,
		SASLType:     sasl,
		WriteTimeout: o.AckTimeout,
	})
	if err != nil {
		_ = tc.Close()
		_ = cache.Close()
		if core.PeerSaidWhy(err) {
			return nil, fmt.Errorf("dial %s: AMQP open: %w", ep, err)
		}
		return nil, fmt.Errorf("dial %s: AMQP open: %w (is it an AMQP 1.0 broker? check the port, and --username/--password if it wants SASL PLAIN)", ep, err)
	}
	opened := time.Now()
	session, err := conn.NewSession(ctx, nil)
	if err != nil {
		_ = conn.Close()
		_ = cache.Close()
		return nil, fmt.Errorf("dial %s: AMQP begin: %w", ep, err)
	}
	ti := tc.Info()
	c.mu.Lock()
	c.conn, c.session = conn, session
	c.product, _ = conn.Properties()["product"].(string)
	c.info = core.ConnectionInfo{
		URL: ep.String(), Transport: string(ep.Scheme), Protocol: "amqp/1.0", ClientID: o.ClientID,
		DialStart: start, TransportReady: ti.TransportReady, Connack: opened,
		TLSResumed: ti.TLSResumed, Used0RTT: ti.Used0RTT, Rejected0RTT: ti.Rejected0RTT,
	}
	c.mu.Unlock()
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if es != nil {
		if err := c.finishEarly(ctx, pc, es); err != nil {
			c.cancel()
			_ = conn.Close()
			c.wg.Wait()
			_ = cache.Close()
			return nil, fmt.Errorf("dial %s: pipelined start: %w", ep, err)
		}
	}
	c.wg.Add(2)
	go c.dispatch()
	go c.watch()
	return c, nil
}

// watch ends the client when the AMQP connection ends.
func (c *client) watch() {
	defer c.wg.Done()
	select {
	case <-c.conn.Done():
		err := c.conn.Err()
		if err == nil {
			err = core.ErrConnectionLost
		}
		c.end(fmt.Errorf("%w: %w", core.ErrConnectionLost, err))
	case <-c.ctx.Done():
	}
}

func (c *client) end(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	c.doneOnce.Do(func() { close(c.done) })
}

func (c *client) Done() <-chan struct{} { return c.done }

func (c *client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// address maps a topic to the AMQP address.
func (c *client) address(topic string) string { return c.prefix + topic }

// check refuses a topic (wildcards) and QoS the client cannot serve.
func (c *client) check(topic string, qos byte) error {
	if strings.ContainsAny(topic, "+#") {
		return fmt.Errorf("topic %q: %w", topic, ErrWildcard)
	}
	return c.checkQoS(topic, qos)
}

// checkFilter is check for a subscription: the broker's own wildcard
// syntax passes where the client knows it.
func (c *client) checkFilter(filter string, qos byte) error {
	switch {
	case c.product == ProductArtemis && strings.Contains(filter, "+"):
		return fmt.Errorf("filter %q: %w (ActiveMQ Artemis's wildcards: # for any number of words, * for one, between . separators)", filter, ErrWildcard)
	case c.product == ProductArtemis:
		for _, w := range strings.Split(filter, ".") {
			if w != "#" && strings.Contains(w, "#") {
				return fmt.Errorf("filter %q: %w (on ActiveMQ Artemis # is a whole word between . separators: sensors.#)", filter, ErrWildcard)
			}
		}
	case strings.ContainsAny(filter, "+#"):
		product := c.product
		if product == "" {
			product = "a broker that does not name its product"
		}
		return fmt.Errorf("filter %q: %w (wildcards pass through to ActiveMQ Artemis; this is %s)", filter, ErrWildcard, product)
	}
	return c.checkQoS(filter, qos)
}

func (c *client) checkQoS(topic string, qos byte) error {
	switch {
	case c.Err() != nil:
		return c.Err()
	case topic == "":
		return errors.New("empty topic: give an AMQP address")
	case qos == 2:
		return ErrQoS2
	case qos > 2:
		return fmt.Errorf("QoS %d: want 0 or 1", qos)
	}
	return nil
}

// sender returns the sender link of addr, attaching it on first use.
func (c *client) sender(ctx context.Context, addr string) (*goamqp.Sender, error) {
	c.mu.Lock()
	s := c.senders[addr]
	c.mu.Unlock()
	if s != nil {
		return s, nil
	}
	s, err := c.session.NewSender(ctx, addr, &goamqp.SenderOptions{SettlementMode: goamqp.SenderSettleModeMixed.Ptr()})
	if err != nil {
		return nil, fmt.Errorf("attach sender to %q: %w", addr, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.senders[addr]; old != nil { // attached concurrently
		go func() { _ = s.Close(context.Background()) }()
		return old, nil
	}
	c.senders[addr] = s
	if c.info.LinkAttached.IsZero() {
		c.info.LinkAttached = time.Now()
	}
	return s, nil
}

func (c *client) Publish(ctx context.Context, topic string, payload []byte, opts core.PublishOptions) (*core.Receipt, error) {
	if err := c.check(topic, opts.QoS); err != nil {
		return nil, err
	}
	if opts.Retain {
		return nil, errors.New("retain: AMQP 1.0 has no retained messages")
	}
	addr := c.address(topic)
	s, err := c.sender(ctx, addr)
	if err != nil {
		return nil, err
	}
	msg := &goamqp.Message{Data: [][]byte{payload}, Properties: &goamqp.MessageProperties{To: &addr}}
	if opts.MessageID != "" {
		msg.Properties.MessageID = opts.MessageID
	}
	if len(opts.Properties) > 0 {
		msg.ApplicationProperties = make(map[string]any, len(opts.Properties))
		for k, v := range opts.Properties {
			msg.ApplicationProperties[k] = v
		}
	}
	r, complete := core.NewReceipt()
	if err := c.transfer(ctx, s, addr, msg, opts.QoS, complete); err != nil {
		return nil, err
	}
	return r, nil
}

// transfer sends msg on s: at QoS 0 pre-settled, complete called when it
// was written; at QoS 1 unsettled, complete called (from a goroutine of
// c.wg) with the broker's disposition, or an error after AckTimeout, when
// the connection ends or on Close.
func (c *client) transfer(ctx context.Context, s *goamqp.Sender, addr string, msg *goamqp.Message, qos byte, complete func(time.Time, error)) error {
	if qos == 0 {
		if err := s.Send(ctx, msg, &goamqp.SendOptions{Settled: true}); err != nil {
			return fmt.Errorf("send to %q: %w", addr, err)
		}
		now := time.Now()
		c.firstTransfer(now)
		complete(now, nil)
		return nil
	}
	sr, err := s.SendWithReceipt(ctx, msg, nil)
	if err != nil {
		return fmt.Errorf("send to %q: %w", addr, err)
	}
	c.firstTransfer(time.Now())
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		wctx, cancel := context.WithTimeout(c.ctx, c.o.AckTimeout)
		defer cancel()
		state, err := sr.Wait(wctx)
		switch {
		case err != nil && c.ctx.Err() != nil:
			complete(time.Time{}, core.ErrClosed)
		case err != nil && wctx.Err() != nil:
			complete(time.Time{}, fmt.Errorf("no disposition within %s: %w", c.o.AckTimeout, err))
		case err != nil:
			complete(time.Time{}, fmt.Errorf("%w: %w", core.ErrConnectionLost, err))
		default:
			complete(time.Now(), outcome(state))
		}
	}()
	return nil
}

// outcome turns a delivery state into the receipt's error.
func outcome(state goamqp.DeliveryState) error {
	switch s := state.(type) {
	case *goamqp.StateAccepted:
		return nil
	case *goamqp.StateRejected:
		if s.Error != nil {
			return fmt.Errorf("broker rejected the message: %w", s.Error)
		}
		return errors.New("broker rejected the message")
	case *goamqp.StateReleased:
		return errors.New("broker released the message (not delivered; send again)")
	case *goamqp.StateModified:
		return errors.New("broker modified the message (not delivered; send again)")
	}
	return fmt.Errorf("unexpected delivery state %T", state)
}

func (c *client) firstTransfer(t time.Time) {
	c.mu.Lock()
	if c.info.FirstTransfer.IsZero() {
		c.info.FirstTransfer = t
	}
	c.mu.Unlock()
}

// Subscribe attaches a receiver link to the filter's address. With
// Options.PersistentSession the link is a durable subscription: named
// after the address (with the container id, the client id, the broker
// finds it again), source durable unsettled-state with expiry policy
// never and capability topic (what ActiveMQ Artemis needs for a durable
// topic subscription). A broker that answers with a source it does not
// keep is refused with ErrNotDurable, the link detached.
func (c *client) Subscribe(ctx context.Context, filter string, opts core.SubscribeOptions, h core.Handler) error {
	if err := c.checkFilter(filter, min(opts.QoS, 1)); err != nil {
		return err
	}
	addr := c.address(filter)
	ro := &goamqp.ReceiverOptions{Credit: c.credit}
	if c.o.PersistentSession {
		ro.Name = addr
		ro.SourceDurability = goamqp.DurabilityUnsettledState
		ro.SourceExpiryPolicy = goamqp.ExpiryPolicyNever
		ro.SourceCapabilities = []string{"topic"}
	}
	r, err := c.session.NewReceiver(ctx, addr, ro)
	if err != nil {
		return fmt.Errorf("attach receiver to %q: %w", addr, err)
	}
	if c.o.PersistentSession {
		src, ok := c.tap.source(r.LinkName())
		if !ok || src.durable == 0 || src.expiry != string(goamqp.ExpiryPolicyNever) {
			cctx, cancel := context.WithTimeout(ctx, c.o.AckTimeout)
			_ = r.Close(cctx)
			cancel()
			expiry := src.expiry
			if expiry == "" {
				expiry = "session-end (default)"
			}
			return fmt.Errorf("durable subscription to %q: %w (answer: durable %d, expiry policy %s); subscribe without --persistent", addr, ErrNotDurable, src.durable, expiry)
		}
	}
	c.mu.Lock()
	if c.info.LinkAttached.IsZero() {
		c.info.LinkAttached = time.Now()
	}
	c.mu.Unlock()
	c.wg.Add(1)
	go c.receive(r, min(opts.QoS, 1), h)
	return nil
}

// receive hands the messages of one receiver to the dispatcher.
func (c *client) receive(r *goamqp.Receiver, qos byte, h core.Handler) {
	defer c.wg.Done()
	for {
		msg, err := r.Receive(c.ctx, nil)
		if err != nil {
			return
		}
		d := delivery{r: r, msg: msg, qos: qos, h: h, at: time.Now(), to: r.Address()}
		select {
		case c.deliveries <- d:
		case <-c.ctx.Done():
			return
		}
	}
}

// dispatch calls handlers one at a time, in arrival order, and accepts each
// message after its handler returned.
//
// The accept is not cut short by Close: Close lets the delivery in hand
// finish (closeGrace), or a durable subscription would get the message
// again after the handler had it (iotq sub -n 1 --persistent would see
// the same message on every run).
func (c *client) dispatch() {
	defer c.wg.Done()
	defer close(c.dispatched)
	for {
		select {
		case <-c.quit:
			return
		case <-c.ctx.Done():
			return
		case d := <-c.deliveries:
			d.h(c.message(d))
			actx, cancel := context.WithTimeout(context.Background(), c.o.AckTimeout)
			stop := context.AfterFunc(c.ctx, cancel) // ends with the connection, too
			_ = d.r.AcceptMessage(actx, d.msg)
			stop()
			cancel()
		}
	}
}

// closeGrace bounds how long Close waits for the delivery in hand (its
// handler and accept); a handler that calls Close itself costs this long.
const closeGrace = 5 * time.Second

func (c *client) ConnectionInfo() core.ConnectionInfo {
	c.mu.Lock()
	info := c.info
	c.mu.Unlock()
	if st, ok := c.tc.QUICStats(); ok {
		info.QUIC = &st
	}
	return info
}

// Close ends the session and the connection (AMQP close), fails pending
// receipts with ErrClosed and waits for the client's goroutines.
func (c *client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		c.end(core.ErrClosed)
		close(c.quit)
		t := time.NewTimer(closeGrace)
		select {
		case <-c.dispatched:
		case <-t.C:
		}
		t.Stop()
		c.cancel()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = c.session.Close(ctx)
		cancel()
		err := c.conn.Close()
		c.wg.Wait()
		var ae *goamqp.ConnError
		if errors.As(err, &ae) && ae.RemoteErr == nil {
			err = nil // closed by us: not a failure
		}
		c.closeErr = errors.Join(err, c.cache.Close())
	})
	return c.closeErr
}
