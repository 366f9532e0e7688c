package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// wsConn adapts a WebSocket to net.Conn: a Write is one binary message, Read
// reads across message boundaries. Safe for one reader and concurrent
// writers; Close may be called at any time.
type wsConn struct {
	ws *websocket.Conn

	rmu sync.Mutex // guards r
	r   io.Reader  // current message, nil between messages

	wmu sync.Mutex // serialises writes

	closeOnce sync.Once
	closeErr  error

	info  Info   // client side only
	flush func() // client side: session cache flush, may be nil
}

func newWSConn(ws *websocket.Conn) *wsConn { return &wsConn{ws: ws} }

func (c *wsConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for {
		if c.r == nil {
			mt, r, err := c.ws.NextReader()
			if err != nil {
				if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway, websocket.CloseNoStatusReceived) {
					return 0, io.EOF
				}
				return 0, err
			}
			if mt != websocket.BinaryMessage {
				_ = c.ws.WriteControl(websocket.CloseMessage,
					websocket.FormatCloseMessage(websocket.CloseUnsupportedData, "MQTT needs binary frames"),
					time.Now().Add(time.Second))
				return 0, ErrNotBinary
			}
			c.r = r
		}
		n, err := c.r.Read(p)
		if errors.Is(err, io.EOF) {
			c.r = nil
			if n > 0 {
				return n, nil
			}
			continue
		}
		return n, err
	}
}

func (c *wsConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.ws.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close sends a close frame (bounded by one second) and closes the socket.
// Idempotent.
func (c *wsConn) Close() error {
	c.closeOnce.Do(func() {
		_ = c.ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""),
			time.Now().Add(time.Second))
		c.closeErr = c.ws.Close()
		if c.flush != nil {
			c.flush()
		}
	})
	return c.closeErr
}

func (c *wsConn) LocalAddr() net.Addr  { return c.ws.LocalAddr() }
func (c *wsConn) RemoteAddr() net.Addr { return c.ws.RemoteAddr() }
func (c *wsConn) SetDeadline(t time.Time) error {
	return errors.Join(c.ws.SetReadDeadline(t), c.ws.SetWriteDeadline(t))
}
func (c *wsConn) SetReadDeadline(t time.Time) error  { return c.ws.SetReadDeadline(t) }
func (c *wsConn) SetWriteDeadline(t time.Time) error { return c.ws.SetWriteDeadline(t) }
func (c *wsConn) Info() Info                         { return c.info }
func (c *wsConn) QUICStats() (QUICStats, bool)       { return QUICStats{}, false }

func dialWS(ctx context.Context, ep Endpoint, opts DialOptions, start time.Time) (Conn, error) {
	var nd net.Dialer
	info := Info{Scheme: ep.Scheme, DialStart: start}
	d := websocket.Dialer{
		NetDialContext: nd.DialContext,
		Subprotocols:   []string{WSSubprotocol},
	}
	if ep.TLS {
		cfg, err := ClientTLSConfig(ep, opts)
		if err != nil {
			return nil, err
		}
		d.NetDialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			raw, err := nd.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			tc, err := tlsHandshake(ctx, raw, cfg)
			if err != nil {
				return nil, err
			}
			st := tc.ConnectionState()
			info.HandshakeDone = time.Now()
			info.TLSResumed = st.DidResume
			info.NegotiatedProto = st.NegotiatedProtocol
			return tc, nil
		}
	}
	u := url.URL{Scheme: string(ep.Scheme), Host: ep.Address(), Path: ep.Path}
	ws, resp, err := d.DialContext(ctx, u.String(), nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("websocket upgrade: %w (HTTP %s; is the path %q right?)", err, resp.Status, ep.Path)
		}
		return nil, fmt.Errorf("websocket: %w", err)
	}
	info.TransportReady = time.Now()
	c := newWSConn(ws)
	c.info = info
	return c, nil
}

// wsListener serves WebSocket upgrades on one path and queues the conns.
type wsListener struct {
	ep  Endpoint
	nl  net.Listener
	srv *http.Server
	q   *acceptQueue
	log *slog.Logger

	mu     sync.Mutex // guards closed and wg.Add
	closed bool
	wg     sync.WaitGroup // Serve and upgrade handlers

	once sync.Once
	err  error
}

func listenWS(ep Endpoint, opts ListenOptions, log *slog.Logger) (Listener, error) {
	nl, err := net.Listen("tcp", ep.Address())
	if err != nil {
		return nil, err
	}
	if ep.TLS {
		nl = tls.NewListener(nl, opts.TLSConfig.Clone())
	}
	l := &wsListener{ep: boundEndpoint(ep, nl.Addr()), nl: nl, q: newAcceptQueue(), log: log}
	up := &websocket.Upgrader{
		Subprotocols: []string{WSSubprotocol, WSSubprotocolLegacy},
		// Devices are not browsers with ambient credentials: any origin.
		CheckOrigin: func(*http.Request) bool { return true },
	}
	mux := http.NewServeMux()
	mux.HandleFunc(ep.Path, func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		l.wg.Add(1)
		l.mu.Unlock()
		defer l.wg.Done()
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			log.Debug("websocket upgrade failed", "remote", r.RemoteAddr, "error", err)
			return
		}
		l.q.put(newWSConn(ws))
	})
	l.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: DefaultHandshakeIdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		if err := l.srv.Serve(nl); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("websocket server stopped", "error", err)
		}
	}()
	return l, nil
}

// Accept returns the next upgraded WebSocket conn.
func (l *wsListener) Accept(ctx context.Context) (net.Conn, error) { return l.q.get(ctx) }
func (l *wsListener) Addr() net.Addr                               { return l.nl.Addr() }
func (l *wsListener) Endpoint() Endpoint                           { return l.ep }

func (l *wsListener) Close() error {
	l.once.Do(func() {
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		l.q.close()
		l.err = l.srv.Close()
		l.wg.Wait()
	})
	return l.err
}
