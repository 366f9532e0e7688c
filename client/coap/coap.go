package coap

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"

	"github.com/iotq/iotq/client/internal/core"
	"github.com/iotq/iotq/transport"
	"github.com/iotq/iotq/transport/coapdtls"
	"github.com/iotq/iotq/transport/coapmsg"
	"github.com/iotq/iotq/transport/endpoint"
)

// Errors of this package.
var (
	// ErrResponse is wrapped by errors for CoAP error responses (4.xx, 5.xx).
	ErrResponse = errors.New("coap error response")
	// ErrQoS2: CoAP has no exactly-once delivery.
	ErrQoS2 = errors.New("QoS 2 (exactly once) is not available over CoAP; use 0 (non-confirmable) or 1 (confirmable)")
)

// Client is a CoAP client behind the common API.
type Client struct {
	o    core.Options
	ep   endpoint.Endpoint
	pfx  []string // resource path prefix of topics ("t")
	info core.ConnectionInfo

	// datagram transports (UDP, DTLS)
	msg  *coapmsg.Endpoint
	peer net.Addr
	// stream transports (TCP, TLS, QUIC)
	sc     net.Conn
	wmu    sync.Mutex
	cache  *transport.FileSessionCache       // TLS tickets / DTLS sessions (nil: none)
	tokens map[string]func(*message.Message) // stream only; guarded by mu
	// pending fails the stream requests still waiting for their response
	// when the connection ends (stream only; guarded by mu).
	pending map[string]func(error)

	mu     sync.Mutex
	closed bool
	err    error
	done   chan struct{}
	subs   map[string]*subscription
	queue  []func()
	wake   chan struct{}
	wg     sync.WaitGroup
	closeO sync.Once
}

type subscription struct {
	filter string
	token  message.Token
	h      core.Handler
	cancel func()
	last   uint32
	seen   bool
	at     time.Time
}

// Dial connects to the CoAP server at ep: coap (UDP), coaps (DTLS 1.2; PSK
// identity and key from o.Username and o.Password, else certificates),
// coap+tcp, coaps+tcp (RFC 8323) and coap+quic (experimental). With
// o.SessionCacheFile, coaps resumes its DTLS session (abbreviated
// handshake), coaps+tcp its TLS session and coap+quic its QUIC session
// (0-RTT); ConnectionInfo.TLSResumed says whether it did. The URL's
// query may set the RFC 7252 parameters of UDP and DTLS: ack_timeout=2s,
// ack_random_factor=1.5, max_retransmit=4, nstart=1, cocoa=1. Topics are
// the resources /t/<topic> (the broker's direct form); ?prefix=ps/data
// changes "t".
func Dial(ctx context.Context, ep endpoint.Endpoint, o core.Options) (core.Client, error) {
	o = o.WithDefaults(func() string { return fmt.Sprintf("%x", []byte(coapmsg.NewToken()[:6])) })
	params, prefix, err := urlParams(ep)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.ConnectTimeout)
	defer cancel()
	c := &Client{o: o, ep: ep, pfx: prefix, done: make(chan struct{}), subs: map[string]*subscription{},
		tokens: map[string]func(*message.Message){}, pending: map[string]func(error){}, wake: make(chan struct{}, 1)}
	c.info = core.ConnectionInfo{URL: ep.String(), Transport: string(ep.Scheme), Protocol: "coap", ClientID: o.ClientID, DialStart: time.Now()}
	switch ep.Transport {
	case endpoint.TransportUDP, endpoint.TransportDTLS:
		err = c.dialDatagram(ctx, params)
	default:
		err = c.dialStream(ctx)
	}
	if err != nil {
		return nil, err
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.deliverLoop()
	}()
	return c, nil
}

func urlParams(ep endpoint.Endpoint) (coapmsg.Params, []string, error) {
	var p coapmsg.Params
	var errs []error
	q := ep.Options()
	dur := func(k string, d *time.Duration) {
		if v := q.Get(k); v != "" {
			x, err := time.ParseDuration(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("URL option %s=%q: want a duration like 2s", k, v))
			}
			*d = x
		}
	}
	dur("ack_timeout", &p.AckTimeout)
	if v := q.Get("ack_random_factor"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("URL option ack_random_factor=%q: want a number >= 1", v))
		}
		p.AckRandomFactor = f
	}
	for k, dst := range map[string]*int{"max_retransmit": &p.MaxRetransmit, "nstart": &p.NStart} {
		if v := q.Get(k); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("URL option %s=%q: want an integer", k, v))
			}
			*dst = n
			if k == "max_retransmit" && n == 0 {
				*dst = -1 // explicit zero: no retransmission
			}
		}
	}
	p.CoCoA = q.Get("cocoa") == "1" || q.Get("cocoa") == "true"
	prefix := []string{"t"}
	if v := q.Get("prefix"); v != "" {
		prefix = strings.Split(strings.Trim(v, "/"), "/")
	}
	if err := p.Validate(); err != nil {
		errs = append(errs, err)
	}
	return p, prefix, errors.Join(errs...)
}

func (c *Client) dialDatagram(ctx context.Context, p coapmsg.Params) error {
	addr, err := net.ResolveUDPAddr("udp", c.ep.Address())
	if err != nil {
		return fmt.Errorf("coap dial %s: %w", c.ep, err)
	}
	var pc net.PacketConn
	if c.ep.Transport == endpoint.TransportDTLS {
		cc := coapdtls.ClientConfig{Identity: c.o.Username, Key: []byte(c.o.Password)}
		if c.o.Username == "" {
			tc, err := c.tlsConfig()
			if err != nil {
				return err
			}
			cc.TLSConfig = tc
		}
		if c.o.SessionCacheFile != "" {
			// The DTLS session (ID and master secret) is kept in the same
			// file as TLS tickets, under its own keys: the next dial, in
			// this process or another, resumes it.
			c.cache, err = transport.NewFileSessionCache(c.o.SessionCacheFile, c.o.Logger)
			if err != nil {
				return fmt.Errorf("session cache %s: %w (check --session-cache)", c.o.SessionCacheFile, err)
			}
			cc.Sessions = c.cache
		}
		var dc *coapdtls.ClientConn
		dc, err = coapdtls.Dial(ctx, c.ep.Address(), cc)
		if err != nil {
			_ = c.cache.Close()
		} else {
			pc = dc
			c.info.TLSResumed = dc.Resumed()
			if c.cache != nil {
				// The session is stored once the handshake ends: write it
				// now, so a process that ends without Close leaves it too.
				c.cache.Flush()
			}
		}
	} else {
		laddr := &net.UDPAddr{}
		if addr.IP.To4() == nil {
			laddr.IP = net.IPv6zero
		}
		pc, err = net.ListenUDP("udp", laddr)
	}
	if err != nil {
		return fmt.Errorf("coap dial %s: %w", c.ep, err)
	}
	c.info.TransportReady = time.Now()
	c.peer = addr
	c.msg, err = coapmsg.New(pc, coapmsg.Options{Params: p, Logger: c.o.Logger})
	if err != nil {
		_ = pc.Close()
		_ = c.cache.Close()
		return err
	}
	// A CoAP ping (empty CON) is answered with RST: proof that a CoAP
	// endpoint listens, and the end of "connecting".
	pong := make(chan error, 1)
	ping := &message.Message{Type: message.Confirmable, Code: codes.Empty}
	if err := c.msg.Send(addr, ping, func(_ *message.Message, err error) { pong <- err }); err != nil {
		_ = c.msg.Close()
		_ = c.cache.Close()
		return err
	}
	select {
	case err = <-pong:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil && !errors.Is(err, coapmsg.ErrReset) {
		_ = c.msg.Close()
		_ = c.cache.Close()
		return fmt.Errorf("coap dial %s: no CoAP endpoint answered a ping: %w", c.ep, err)
	}
	c.info.Connack = time.Now()
	return nil
}

func (c *Client) tlsConfig() (*tls.Config, error) {
	tc := &tls.Config{InsecureSkipVerify: c.o.Insecure, ServerName: c.o.ServerName} //nolint:gosec // tests choose Insecure
	if c.o.TLSConfig != nil {
		tc = c.o.TLSConfig.Clone()
		tc.InsecureSkipVerify = tc.InsecureSkipVerify || c.o.Insecure
	}
	if tc.ServerName == "" {
		tc.ServerName = c.ep.Host
	}
	if c.o.CAFile != "" {
		b, err := os.ReadFile(c.o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("CA file %s: no PEM certificate found", c.o.CAFile)
		}
		tc.RootCAs = pool
	}
	return tc, nil
}

func (c *Client) dialStream(ctx context.Context) error {
	conn, cache, err := core.DialTransport(ctx, c.ep, c.o)
	if err != nil {
		return err
	}
	c.sc, c.cache = conn, cache
	ti := conn.Info()
	c.info.TransportReady = ti.TransportReady
	c.info.TLSResumed, c.info.Used0RTT, c.info.Rejected0RTT = ti.TLSResumed, ti.Used0RTT, ti.Rejected0RTT
	csm := &message.Message{Code: codes.CSM}
	csm.Options = csm.Options.Add(message.Option{ID: 4}) // Block-Wise-Transfer
	if err := c.writeStream(csm); err != nil {
		_ = conn.Close()
		return err
	}
	r := bufio.NewReader(conn)
	_ = conn.SetReadDeadline(time.Now().Add(c.o.ConnectTimeout))
	m, err := coapmsg.ReadStreamMessage(r, 16<<20)
	if err == nil && m.Code != codes.CSM {
		err = fmt.Errorf("server's first message is %v, not a CSM (RFC 8323)", m.Code)
	}
	if err != nil {
		_ = conn.Close()
		return fmt.Errorf("coap dial %s: %w", c.ep, err)
	}
	_ = conn.SetReadDeadline(time.Time{})
	c.info.Connack = time.Now()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.readStream(r)
	}()
	return nil
}

func (c *Client) writeStream(m *message.Message) error {
	b, err := coapmsg.EncodeStream(m)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.sc.Write(b); err != nil {
		return fmt.Errorf("coap write: %w", err)
	}
	return nil
}

func (c *Client) readStream(r *bufio.Reader) {
	for {
		m, err := coapmsg.ReadStreamMessage(r, 16<<20)
		if err != nil {
			c.fail(fmt.Errorf("%w: %w", core.ErrConnectionLost, err))
			return
		}
		switch m.Code {
		case codes.Ping:
			_ = c.writeStream(&message.Message{Code: codes.Pong, Token: m.Token})
			continue
		case codes.Release, codes.Abort:
			c.fail(fmt.Errorf("%w: server sent %v %s", core.ErrConnectionLost, m.Code, m.Payload))
			return
		}
		c.mu.Lock()
		h := c.tokens[string(m.Token)]
		c.mu.Unlock()
		if h != nil {
			h(m)
		}
	}
}

// fail ends the connection with err (first call wins) and fails the
// stream requests still waiting for a response with it.
func (c *Client) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	close(c.done)
	pending := c.pending
	c.pending = map[string]func(error){}
	c.mu.Unlock()
	for _, f := range pending {
		f(err)
	}
}

// handleToken routes responses carrying token to h until cancel.
func (c *Client) handleToken(token message.Token, h func(*message.Message)) (cancel func()) {
	if c.msg != nil {
		return c.msg.HandleToken(c.peer, token, h)
	}
	c.mu.Lock()
	c.tokens[string(token)] = h
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.tokens, string(token))
		c.mu.Unlock()
	}
}

// exchange sends a request. done receives, for CON over UDP/DTLS, the ACK
// (possibly carrying the response); on streams with wantResp, the
// response; otherwise nil once written.
func (c *Client) exchange(m *message.Message, con, wantResp bool, done func(*message.Message, error)) error {
	if len(m.Token) == 0 {
		m.Token = coapmsg.NewToken()
	}
	if c.msg != nil {
		m.Type = message.NonConfirmable
		if con {
			m.Type = message.Confirmable
		}
		// The message layer ends what is pending with its own ErrClosed
		// when Close closes it: the common API says ErrClosed.
		err := c.msg.Send(c.peer, m, func(ack *message.Message, err error) {
			if errors.Is(err, coapmsg.ErrClosed) {
				err = fmt.Errorf("%w: %w", core.ErrClosed, err)
			}
			done(ack, err)
		})
		if errors.Is(err, coapmsg.ErrClosed) {
			err = fmt.Errorf("%w: %w", core.ErrClosed, err)
		}
		return err
	}
	if wantResp {
		// The response, the end of the connection or AckTimeout, whichever
		// comes first, completes the request.
		var once sync.Once
		var timer *time.Timer // guarded by c.mu
		var cancelToken func()
		key := string(m.Token)
		finish := func(r *message.Message, err error) {
			once.Do(func() {
				cancelToken()
				c.mu.Lock()
				delete(c.pending, key)
				t := timer
				c.mu.Unlock()
				if t != nil {
					t.Stop()
				}
				done(r, err)
			})
		}
		// No response can arrive before the write below.
		cancelToken = c.handleToken(m.Token, func(r *message.Message) { finish(r, nil) })
		c.mu.Lock()
		if c.err != nil {
			err := c.err
			c.mu.Unlock()
			cancelToken()
			return err
		}
		c.pending[key] = func(err error) { finish(nil, err) }
		timer = time.AfterFunc(c.o.AckTimeout, func() {
			finish(nil, fmt.Errorf("no response within %s (AckTimeout)", c.o.AckTimeout))
		})
		c.mu.Unlock()
		if err := c.writeStream(m); err != nil {
			finish(nil, err)
			return err
		}
		return nil
	}
	err := c.writeStream(m)
	if err == nil {
		done(nil, nil)
	}
	return err
}

func (c *Client) topicMessage(code codes.Code, topic string) (*message.Message, error) {
	if topic == "" {
		return nil, errors.New("empty topic")
	}
	m := &message.Message{Code: code}
	for _, s := range append(append([]string(nil), c.pfx...), strings.Split(topic, "/")...) {
		if len(s) > 255 {
			return nil, fmt.Errorf("topic level %q longer than 255 bytes (a CoAP Uri-Path limit)", s)
		}
		m.Options = m.Options.Add(message.Option{ID: message.URIPath, Value: []byte(s)})
	}
	return m, nil
}

func (c *Client) check() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return core.ErrClosed
	}
	if c.err != nil {
		return c.err
	}
	return nil
}

func codeErr(m *message.Message) error {
	if m == nil || m.Code == codes.Empty || m.Code>>5 == 2 {
		return nil
	}
	return fmt.Errorf("%w %v: %s", ErrResponse, m.Code, m.Payload)
}

const blockSZX = 6 // 1024-byte blocks

// Publish PUTs payload to the topic's resource: QoS 0 as a NON request (the
// receipt completes when written), QoS 1 as CON (completed by the ACK
// over UDP/DTLS, by the response over streams; an error response fails
// it). Payloads above 1024 bytes go block-wise (RFC 7959 Block1) over
// UDP/DTLS. The broker keeps every CoAP publication as the topic's latest
// value whatever opts.Retain says.
func (c *Client) Publish(ctx context.Context, topic string, payload []byte, opts core.PublishOptions) (*core.Receipt, error) {
	if err := core.CheckPublishExtras("CoAP", opts, false, false); err != nil {
		return nil, err
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	if strings.ContainsAny(topic, "+#") {
		return nil, fmt.Errorf("publish to %q: a topic name has no wildcards", topic)
	}
	switch {
	case opts.QoS == 2:
		return nil, fmt.Errorf("publish to %q: %w", topic, ErrQoS2)
	case opts.QoS > 2:
		return nil, fmt.Errorf("publish to %q: QoS %d: want 0 or 1", topic, opts.QoS)
	}
	r, complete := core.NewReceipt()
	con := opts.QoS > 0
	if c.msg == nil || len(payload) <= 1<<(blockSZX+4) {
		m, err := c.topicMessage(codes.PUT, topic)
		if err != nil {
			return nil, err
		}
		m.Payload = payload
		err = c.exchange(m, con, con, func(ack *message.Message, err error) {
			if err == nil {
				err = codeErr(ack)
			}
			complete(time.Now(), err)
		})
		if err != nil {
			return nil, err
		}
		return r, nil
	}
	// Block-wise: one block at a time, each acknowledged (2.31) before the next.
	token := coapmsg.NewToken()
	var send func(num int) error
	send = func(num int) error {
		size := 1 << (blockSZX + 4)
		start := num * size
		end := min(start+size, len(payload))
		more := uint32(0)
		if end < len(payload) {
			more = 1
		}
		m, err := c.topicMessage(codes.PUT, topic)
		if err != nil {
			return err
		}
		m.Token = token
		m.Payload = payload[start:end]
		buf := make([]byte, 4)
		n, _ := message.EncodeUint32(buf, uint32(num)<<4|more<<3|blockSZX)
		m.Options = m.Options.Add(message.Option{ID: message.Block1, Value: buf[:n]})
		if num == 0 {
			n, _ := message.EncodeUint32(buf[:0:4], uint32(len(payload)))
			m.Options = m.Options.Add(message.Option{ID: message.Size1, Value: buf[:n]})
		}
		return c.exchange(m, true, true, func(ack *message.Message, err error) {
			if err == nil {
				err = codeErr(ack)
			}
			if err != nil || more == 0 {
				complete(time.Now(), err)
				return
			}
			if err := send(num + 1); err != nil {
				complete(time.Now(), err)
			}
		})
	}
	if err := send(0); err != nil {
		return nil, err
	}
	return r, nil
}

// Subscribe observes the topic's resource (GET with Observe 0, RFC 7641):
// CON when opts.QoS > 0 (the broker then sends confirmable
// notifications), NON otherwise. It returns once the server accepted the
// observation; the current value, if the topic has one, is delivered
// first, flagged Retained. Wildcard filters are not supported by CoAP.
func (c *Client) Subscribe(ctx context.Context, filter string, opts core.SubscribeOptions, h core.Handler) error {
	if err := c.check(); err != nil {
		return err
	}
	if strings.ContainsAny(filter, "+#") {
		return fmt.Errorf("subscribe %q: CoAP observes one resource: wildcard filters are not supported", filter)
	}
	m, err := c.topicMessage(codes.GET, filter)
	if err != nil {
		return err
	}
	m.Token = coapmsg.NewToken()
	m.Options = m.Options.Add(message.Option{ID: message.Observe, Value: []byte{}})
	s := &subscription{filter: filter, token: m.Token, h: h}
	first := make(chan *message.Message, 1)
	var gotFirst atomic.Bool
	s.cancel = c.handleToken(m.Token, func(r *message.Message) {
		if gotFirst.CompareAndSwap(false, true) {
			first <- r
			return
		}
		c.notification(s, r, false)
	})
	fail := make(chan error, 1)
	err = c.exchange(m, opts.QoS > 0, false, func(_ *message.Message, err error) {
		if err != nil {
			fail <- err
		}
	})
	if err != nil {
		s.cancel()
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.AckTimeout)
	defer cancel()
	var r *message.Message
	select {
	case r = <-first:
	case err = <-fail:
	case <-ctx.Done():
		err = ctx.Err()
	case <-c.done:
		err = c.Err()
	}
	if err == nil {
		err = codeErr(r)
	}
	if err == nil {
		if _, oerr := r.Options.Observe(); oerr != nil {
			err = errors.New("the server did not accept the observation (no Observe option in its response)")
		}
	}
	if err != nil {
		s.cancel()
		return fmt.Errorf("subscribe %q: %w", filter, err)
	}
	c.mu.Lock()
	old := c.subs[filter]
	c.subs[filter] = s
	c.mu.Unlock()
	if old != nil {
		old.cancel()
		if c.sc != nil {
			// Streams never answer a notification with RST: deregister
			// the replaced observation explicitly (RFC 7641 section 3.6).
			if m, err := c.topicMessage(codes.GET, filter); err == nil {
				m.Token = old.token
				m.Options = m.Options.Add(message.Option{ID: message.Observe, Value: []byte{1}})
				_ = c.exchange(m, false, false, func(*message.Message, error) {})
			}
		}
	}
	if len(r.Payload) > 0 {
		c.notification(s, r, true) // the stored value, like an MQTT retained message
	}
	return nil
}

// notification queues a notification for the handler (after the RFC 7641
// freshness check).
func (c *Client) notification(s *subscription, r *message.Message, stored bool) {
	now := time.Now()
	if r.Code != codes.Content {
		c.mu.Lock()
		if c.subs[s.filter] == s {
			delete(c.subs, s.filter)
		}
		c.mu.Unlock()
		s.cancel()
		c.o.Logger.Warn("coap observation ended by the server", "topic", s.filter, "code", r.Code.String())
		return
	}
	if c.msg != nil {
		if v, err := r.Options.Observe(); err == nil {
			c.mu.Lock()
			fresh := !s.seen || (s.last < v && v-s.last < 1<<23) || (s.last > v && s.last-v > 1<<23) || now.Sub(s.at) > 128*time.Second
			if fresh {
				s.last, s.seen, s.at = v, true, now
			}
			c.mu.Unlock()
			if !fresh {
				return // older than one already delivered (reordered)
			}
		}
	}
	payload := r.Payload
	b2, berr := r.Options.GetUint32(message.Block2)
	c.enqueue(func() {
		if berr == nil && b2&8 != 0 {
			full, err := c.fetchRest(s.filter, payload, b2)
			if err != nil {
				c.o.Logger.Warn("coap: fetching the rest of a block-wise notification failed", "topic", s.filter, "error", err)
				return
			}
			payload = full
		}
		s.h(core.Message{Topic: s.filter, Payload: payload, QoS: 0, Retained: stored, Received: now})
	})
}

// fetchRest GETs the blocks after the first one (RFC 7959 section 2.4).
func (c *Client) fetchRest(topic string, first []byte, b2 uint32) ([]byte, error) {
	szx := b2 & 7
	out := append([]byte(nil), first...)
	for num := uint32(1); ; num++ {
		m, err := c.topicMessage(codes.GET, topic)
		if err != nil {
			return nil, err
		}
		buf := make([]byte, 4)
		n, _ := message.EncodeUint32(buf, num<<4|szx)
		m.Options = m.Options.Add(message.Option{ID: message.Block2, Value: buf[:n]})
		got := make(chan *message.Message, 1)
		errc := make(chan error, 1)
		var cancel func()
		if c.msg != nil {
			m.Token = coapmsg.NewToken()
			cancel = c.handleToken(m.Token, func(r *message.Message) {
				select {
				case got <- r:
				default:
				}
			})
		}
		err = c.exchange(m, true, true, func(r *message.Message, err error) {
			if err != nil {
				errc <- err
			} else if r != nil && r.Code != codes.Empty {
				select {
				case got <- r:
				default:
				}
			}
		})
		if err != nil {
			return nil, err
		}
		var r *message.Message
		select {
		case r = <-got:
		case err = <-errc:
		case <-time.After(c.o.AckTimeout):
			err = errors.New("no response")
		case <-c.done:
			err = c.Err()
		}
		if cancel != nil {
			cancel()
		}
		if err == nil {
			err = codeErr(r)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r.Payload...)
		v, err := r.Options.GetUint32(message.Block2)
		if err != nil || v&8 == 0 {
			return out, nil
		}
	}
}

func (c *Client) enqueue(f func()) {
	c.mu.Lock()
	c.queue = append(c.queue, f)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *Client) deliverLoop() {
	for {
		c.mu.Lock()
		q := c.queue
		c.queue = nil
		closed := c.closed
		c.mu.Unlock()
		for _, f := range q {
			f()
		}
		if closed {
			return
		}
		if len(q) == 0 {
			select {
			case <-c.wake:
			case <-c.done:
				c.mu.Lock()
				c.closed = c.closed || c.err != nil
				c.mu.Unlock()
			}
		}
	}
}

// ConnectionInfo returns the connection facts (Connack: the answer to the
// initial CoAP ping over UDP/DTLS, the server's CSM over streams).
func (c *Client) ConnectionInfo() core.ConnectionInfo {
	info := c.info
	if c.sc != nil {
		if st, ok := transport.StatsOf(c.sc); ok {
			info.QUIC = &st
		}
	}
	return info
}

// Done is closed when the connection ends.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err says why the connection ended.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close cancels observations (forgetting them: the server drops them at the
// next confirmable notification or on RST), fails pending exchanges with
// ErrClosed and stops the client's goroutines. Idempotent.
func (c *Client) Close() error {
	c.closeO.Do(func() {
		c.mu.Lock()
		c.closed = true
		subs := c.subs
		c.subs = map[string]*subscription{}
		c.mu.Unlock()
		for _, s := range subs {
			s.cancel()
		}
		c.fail(core.ErrClosed)
		if c.msg != nil {
			_ = c.msg.Close()
		}
		if c.sc != nil {
			_ = c.writeStream(&message.Message{Code: codes.Release})
			_ = c.sc.Close()
		}
		_ = c.cache.Close()
		c.wg.Wait()
	})
	return nil
}
