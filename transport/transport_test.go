package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

var allSchemes = []Scheme{SchemeTCP, SchemeTLS, SchemeWS, SchemeWSS, SchemeQUIC}

func TestEchoEveryScheme(t *testing.T) {
	noLeak(t)
	srvTLS, cliTLS := serverTLS(t, t.TempDir())
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	for _, s := range allSchemes {
		t.Run(string(s), func(t *testing.T) {
			l, err := Listen(string(s)+"://127.0.0.1:0", ListenOptions{TLSConfig: srvTLS})
			if err != nil {
				t.Fatal(err)
			}
			if l.Endpoint().Port == 0 || l.Endpoint().Scheme != s {
				t.Fatalf("endpoint %v: want the bound port and scheme %s", l.Endpoint(), s)
			}
			startEcho(t, l)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := Dial(ctx, l.Endpoint().String(), DialOptions{TLSConfig: cliTLS})
			if err != nil {
				t.Fatal(err)
			}
			roundTrip(t, c, []byte("hello"))
			roundTrip(t, c, big)
			info := c.Info()
			if info.Scheme != s {
				t.Errorf("Info.Scheme = %s, want %s", info.Scheme, s)
			}
			if info.DialStart.IsZero() || info.TransportReady.Before(info.DialStart) {
				t.Errorf("bad timings %+v", info)
			}
			secure := s == SchemeTLS || s == SchemeWSS || s == SchemeQUIC
			if secure == info.HandshakeDone.IsZero() {
				t.Errorf("HandshakeDone = %v for %s", info.HandshakeDone, s)
			}
			if s == SchemeQUIC && info.NegotiatedProto != ALPN {
				t.Errorf("ALPN %q, want %q", info.NegotiatedProto, ALPN)
			}
			_, isQUIC := c.QUICStats()
			if isQUIC != (s == SchemeQUIC) {
				t.Errorf("QUICStats ok = %v for %s", isQUIC, s)
			}
			if c.LocalAddr() == nil || c.RemoteAddr() == nil {
				t.Error("nil address")
			}
			if err := c.Close(); err != nil && s != SchemeQUIC {
				t.Errorf("close: %v", err)
			}
			if err := c.Close(); err != nil && s != SchemeQUIC {
				t.Errorf("second close: %v", err)
			}
		})
	}
}

// TestCloseLosesNoData: a conn that writes and closes at once delivers
// everything, in both directions, over every scheme.
func TestCloseLosesNoData(t *testing.T) {
	noLeak(t)
	srvTLS, cliTLS := serverTLS(t, t.TempDir())
	payload := bytes.Repeat([]byte{0xA5}, 3<<20)
	for _, s := range allSchemes {
		t.Run(string(s), func(t *testing.T) {
			l, err := Listen(string(s)+"://127.0.0.1:0", ListenOptions{TLSConfig: srvTLS})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			type result struct {
				n   int64
				err error
			}
			got := make(chan result, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				c, err := l.Accept(ctx)
				if err != nil {
					got <- result{err: err}
					return
				}
				// Server reads everything, then writes a reply and closes at once.
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				n, err := io.Copy(io.Discard, c)
				if err == nil {
					_, err = c.Write(payload)
				}
				c.Close()
				got <- result{n, err}
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := Dial(ctx, l.Endpoint().String(), DialOptions{TLSConfig: cliTLS})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Write(payload); err != nil {
				t.Fatal(err)
			}
			// Half-close so the server's copy ends: every scheme closes
			// its write side differently, so use the scheme's own way.
			switch cc := c.(type) {
			case *quicConn:
				cc.wmu.Lock()
				_ = cc.stream().Close()
				cc.wmu.Unlock()
			case *plainConn:
				if tc, ok := cc.Conn.(interface{ CloseWrite() error }); ok {
					_ = tc.CloseWrite()
				}
			case *wsConn:
				// WebSocket has no half-close: use a close frame, after
				// which we may still read.
				_ = cc.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
			}
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			back, err := io.Copy(io.Discard, c)
			if s != SchemeWS && s != SchemeWSS && err != nil {
				t.Errorf("client read: %v", err)
			}
			r := <-got
			if r.err != nil && s != SchemeWS && s != SchemeWSS {
				t.Fatalf("server: %v", r.err)
			}
			if r.n != int64(len(payload)) {
				t.Errorf("server got %d bytes, want %d", r.n, len(payload))
			}
			if s != SchemeWS && s != SchemeWSS && back != int64(len(payload)) {
				t.Errorf("client got %d bytes back, want %d", back, len(payload))
			}
			c.Close()
		})
	}
}

func TestQUICWriteThenCloseDeliversEverything(t *testing.T) {
	noLeak(t)
	srvTLS, cliTLS := serverTLS(t, t.TempDir())
	l, err := Listen("quic://127.0.0.1:0", ListenOptions{TLSConfig: srvTLS})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	payload := bytes.Repeat([]byte{7}, 2<<20)
	got := make(chan int64, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := l.Accept(ctx)
		if err != nil {
			got <- -1
			return
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, _ := io.Copy(io.Discard, c)
		c.Close()
		got <- n
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, l.Endpoint().String(), DialOptions{TLSConfig: cliTLS})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(payload); err != nil {
		t.Fatal(err)
	}
	c.Close() // at once: the stream's data must still arrive
	if n := <-got; n != int64(len(payload)) {
		t.Fatalf("server read %d bytes, want %d", n, len(payload))
	}
}

func TestQUICConcurrentWrites(t *testing.T) {
	noLeak(t)
	srvTLS, cliTLS := serverTLS(t, t.TempDir())
	l, err := Listen("quic://127.0.0.1:0", ListenOptions{TLSConfig: srvTLS})
	if err != nil {
		t.Fatal(err)
	}
	startEcho(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, l.Endpoint().String(), DialOptions{TLSConfig: cliTLS})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const writers, per = 8, 200
	msg := func(w int) []byte { return bytes.Repeat([]byte{byte('a' + w)}, 100) }
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				if _, err := c.Write(msg(w)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, writers*per*100)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	// Writes are atomic: every 100-byte record is one writer's.
	for i := 0; i < len(buf); i += 100 {
		rec := buf[i : i+100]
		if !bytes.Equal(rec, bytes.Repeat(rec[:1], 100)) {
			t.Fatalf("record %d interleaved: %q", i/100, rec)
		}
	}
}

func TestAcceptCancelLosesNoConn(t *testing.T) {
	noLeak(t)
	srvTLS, cliTLS := serverTLS(t, t.TempDir())
	for _, s := range allSchemes {
		t.Run(string(s), func(t *testing.T) {
			l, err := Listen(string(s)+"://127.0.0.1:0", ListenOptions{TLSConfig: srvTLS})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			// Cancelled Accepts leave nothing behind.
			for range 3 {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
				if _, err := l.Accept(ctx); !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Accept with expired ctx: %v", err)
				}
				cancel()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := Dial(ctx, l.Endpoint().String(), DialOptions{TLSConfig: cliTLS})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if s == SchemeQUIC { // the server sees the stream once data arrives
				if _, err := c.Write([]byte("x")); err != nil {
					t.Fatal(err)
				}
			}
			sc, err := l.Accept(ctx)
			if err != nil {
				t.Fatalf("the conn after cancelled Accepts was lost: %v", err)
			}
			sc.Close()
			if err := l.Close(); err != nil && s != SchemeQUIC {
				t.Errorf("close: %v", err)
			}
			if _, err := l.Accept(ctx); !isClosedErr(err) {
				t.Errorf("Accept after Close: %v, want closed", err)
			}
		})
	}
}

// TestListenerCloseWithPendingConns: conns that arrived but were never
// accepted are closed with the listener, and nothing leaks.
func TestListenerCloseWithPendingConns(t *testing.T) {
	noLeak(t)
	srvTLS, cliTLS := serverTLS(t, t.TempDir())
	for _, s := range allSchemes {
		t.Run(string(s), func(t *testing.T) {
			l, err := Listen(string(s)+"://127.0.0.1:0", ListenOptions{TLSConfig: srvTLS})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var conns []Conn
			for range 3 {
				c, err := Dial(ctx, l.Endpoint().String(), DialOptions{TLSConfig: cliTLS, QUIC: QUICOptions{CloseTimeout: 200 * time.Millisecond}})
				if err != nil {
					t.Fatal(err)
				}
				_, _ = c.Write([]byte("x"))
				conns = append(conns, c)
			}
			time.Sleep(50 * time.Millisecond)
			l.Close()
			for _, c := range conns {
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				_, err := c.Read(make([]byte, 1))
				if err == nil {
					t.Errorf("read on a never-accepted conn succeeded")
				}
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() && s != SchemeTCP && s != SchemeTLS {
					t.Errorf("%s conn was not closed by the listener's Close", s)
				}
				c.Close()
			}
		})
	}
}

func TestListenRequiresTLSConfig(t *testing.T) {
	for _, s := range []Scheme{SchemeTLS, SchemeWSS, SchemeQUIC} {
		_, err := Listen(string(s)+"://127.0.0.1:0", ListenOptions{})
		if !errors.Is(err, ErrTLSConfigRequired) {
			t.Errorf("%s without TLS config: %v, want ErrTLSConfigRequired", s, err)
		}
	}
}

func TestDialErrorsAreClear(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := Dial(ctx, "mqtt://:1883", DialOptions{}); !errors.Is(err, ErrNoHost) {
		t.Errorf("no host: %v", err)
	}
	if _, err := Dial(ctx, "gopher://x", DialOptions{}); err == nil || !strings.Contains(err.Error(), "unknown scheme") {
		t.Errorf("bad scheme: %v", err)
	}
}

func TestWebSocket(t *testing.T) {
	noLeak(t)
	l, err := Listen("ws://127.0.0.1:0", ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	startEcho(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	base := "ws://" + l.Endpoint().Address()

	t.Run("legacy subprotocol mqttv3.1 is accepted", func(t *testing.T) {
		d := websocket.Dialer{Subprotocols: []string{"mqttv3.1"}}
		ws, resp, err := d.DialContext(ctx, base+"/mqtt", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		defer ws.Close()
		if ws.Subprotocol() != "mqttv3.1" {
			t.Fatalf("subprotocol %q", ws.Subprotocol())
		}
	})
	t.Run("client offers mqtt", func(t *testing.T) {
		c, err := Dial(ctx, base, DialOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if got := c.(*wsConn).ws.Subprotocol(); got != WSSubprotocol {
			t.Fatalf("subprotocol %q, want %q", got, WSSubprotocol)
		}
		// Reads span message boundaries: two writes, one read of both.
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write([]byte("ab"))
		c.Write([]byte("cd"))
		buf := make([]byte, 4)
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "abcd" {
			t.Fatalf("read %q %v", buf, err)
		}
	})
	t.Run("wrong path fails with the path in the error", func(t *testing.T) {
		_, err := Dial(ctx, base+"/other", DialOptions{})
		if err == nil || !strings.Contains(err.Error(), "/other") || !strings.Contains(err.Error(), "404") {
			t.Fatalf("want a 404 error naming the path, got %v", err)
		}
	})
	t.Run("text frames are refused", func(t *testing.T) {
		l2, err := Listen("ws://127.0.0.1:0", ListenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer l2.Close()
		errc := make(chan error, 1)
		go func() {
			c, err := l2.Accept(ctx)
			if err != nil {
				errc <- err
				return
			}
			defer c.Close()
			_, err = c.Read(make([]byte, 10))
			errc <- err
		}()
		ws, resp, err := websocket.DefaultDialer.DialContext(ctx, "ws://"+l2.Endpoint().Address()+"/mqtt", http.Header{})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		defer ws.Close()
		ws.WriteMessage(websocket.TextMessage, []byte("hello"))
		if err := <-errc; !errors.Is(err, ErrNotBinary) {
			t.Fatalf("read of a text frame: %v, want ErrNotBinary", err)
		}
	})
}
