package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iotq/iotq/internal/certs"
)

// serverTLS returns a server config whose ticket keys persist in dir, and
// a client config trusting its CA.
func serverTLS(t testing.TB, dir string) (*tls.Config, *tls.Config) {
	t.Helper()
	srv, f, err := certs.ServerConfig(dir, []string{"localhost", "127.0.0.1", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := certs.CertPool(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	return srv, &tls.Config{RootCAs: pool}
}

// echoServer accepts on l until it closes and echoes every conn. It stops
// at test cleanup and waits for its goroutines.
type echoServer struct {
	l        Listener
	wg       sync.WaitGroup
	mu       sync.Mutex
	accepted []net.Conn
}

func startEcho(t testing.TB, l Listener) *echoServer {
	t.Helper()
	e := &echoServer{l: l}
	ctx, cancel := context.WithCancel(context.Background())
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := l.Accept(ctx)
			if err != nil {
				return
			}
			e.mu.Lock()
			e.accepted = append(e.accepted, c)
			e.mu.Unlock()
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				_, _ = io.Copy(c, c)
				_ = c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		cancel()
		l.Close()
		e.mu.Lock()
		for _, c := range e.accepted {
			_ = c.SetDeadline(time.Now())
		}
		e.mu.Unlock()
		e.wg.Wait()
	})
	return e
}

func (e *echoServer) conns() []net.Conn {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]net.Conn(nil), e.accepted...)
}

// roundTrip writes msg and reads it back within 10 s.
func roundTrip(t testing.TB, c net.Conn, msg []byte) {
	t.Helper()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(msg)
		errc <- err
	}()
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read echo: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("write: %v", err)
	}
	if string(got) != string(msg) {
		t.Fatalf("echo differs: got %d bytes, want %d", len(got), len(msg))
	}
	_ = c.SetDeadline(time.Time{})
}

// noLeak fails the test if goroutines started during it are still running
// shortly after its cleanups ran. Register it first so it runs last.
func noLeak(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutines: %d before, %d after\n%s", before, n, buf)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func isClosedErr(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "closed")
}
