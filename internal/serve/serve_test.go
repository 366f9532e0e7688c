package serve

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tcpAcceptor adapts a loopback net.Listener to Acceptor.
type tcpAcceptor struct{ net.Listener }

func (a tcpAcceptor) Accept(context.Context) (net.Conn, error) { return a.Listener.Accept() }

// failing fails its first n Accepts, then accepts from inner.
type failing struct {
	n     atomic.Int32
	inner Acceptor
}

func (f *failing) Accept(ctx context.Context) (net.Conn, error) {
	if f.n.Add(-1) >= 0 {
		return nil, errors.New("too many open files")
	}
	return f.inner.Accept(ctx)
}

// syncBuf is a bytes.Buffer safe for the logger's goroutine and the test.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}

func TestAcceptLoopRetriesAfterFailuresAndHandsOver(t *testing.T) {
	ln := listen(t)
	var logs syncBuf
	log := slog.New(slog.NewTextHandler(&logs, nil))
	acc := &failing{inner: tcpAcceptor{ln}}
	acc.n.Store(3)
	got := make(chan net.Conn, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		AcceptLoop(context.Background(), acc, log, func(c net.Conn) bool { got <- c; return false })
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case sc := <-got:
		_ = sc.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("no connection handed over after three failed Accepts")
	}
	<-done // handle returned false: the loop ends
	if n := strings.Count(logs.String(), "accept failed"); n != 3 {
		t.Errorf("logged %d accept failures, want 3:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), `error="too many open files"`) {
		t.Errorf("accept failure not logged under key error:\n%s", logs.String())
	}
}

func TestAcceptLoopEndsOnCloseAndOnContext(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	ln := listen(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		AcceptLoop(context.Background(), tcpAcceptor{ln}, log, func(net.Conn) bool { return true })
	}()
	_ = ln.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("AcceptLoop still runs after its listener was closed")
	}

	// A listener that keeps failing: cancelling ctx ends the backoff wait.
	acc := &failing{}
	acc.n.Store(1 << 30)
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan struct{})
	go func() {
		defer close(done)
		AcceptLoop(ctx, acc, log, func(net.Conn) bool { return true })
	}()
	for acc.n.Load() > 1<<30-3 { // it has failed (and paused) a few times
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("AcceptLoop still runs after ctx ended")
	}
}

func TestBackoffBounds(t *testing.T) {
	b := minBackoff
	for range 20 {
		b = min(2*b, maxBackoff)
	}
	if minBackoff <= 0 || b != maxBackoff {
		t.Fatalf("backoff from %v reaches %v, want %v", minBackoff, b, maxBackoff)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAdminServesMetricsHealthAndPprofOnlyWhenAsked(t *testing.T) {
	var healthErr atomic.Pointer[error]
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "x_total 1\n") })
	for _, pp := range []bool{false, true} {
		a, err := StartAdmin(AdminOptions{Addr: "127.0.0.1:0", Metrics: metrics, Pprof: pp,
			Health: func() error {
				if e := healthErr.Load(); e != nil {
					return *e
				}
				return nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		if a.srv.ReadHeaderTimeout != 5*time.Second {
			t.Errorf("ReadHeaderTimeout = %v, want 5s", a.srv.ReadHeaderTimeout)
		}
		base := "http://" + a.Addr().String()
		if code, body := get(t, base+"/metrics"); code != 200 || body != "x_total 1\n" {
			t.Errorf("/metrics: %d %q", code, body)
		}
		healthErr.Store(nil)
		if code, body := get(t, base+"/healthz"); code != 200 || body != "ok\n" {
			t.Errorf("/healthz healthy: %d %q", code, body)
		}
		down := errors.New("shutting down")
		healthErr.Store(&down)
		if code, body := get(t, base+"/healthz"); code != 503 || !strings.Contains(body, "shutting down") {
			t.Errorf("/healthz unhealthy: %d %q", code, body)
		}
		code, _ := get(t, base+"/debug/pprof/")
		if pp && code != 200 || !pp && code != 404 {
			t.Errorf("pprof=%v: /debug/pprof/ answers %d", pp, code)
		}
		a.Close()
		a.Close() // twice is fine
		if _, err := http.Get(base + "/healthz"); err == nil {
			t.Error("admin server still answers after Close")
		}
	}
	var nilAdmin *Admin
	nilAdmin.Close()
	if nilAdmin.Addr() != nil {
		t.Error("nil Admin has an address")
	}
}

func TestAdminListenErrorSaysWhatToWrite(t *testing.T) {
	ln := listen(t)
	_, err := StartAdmin(AdminOptions{Addr: ln.Addr().String()})
	if err == nil || !strings.Contains(err.Error(), "metrics listener") || !strings.Contains(err.Error(), "HOST:PORT") {
		t.Fatalf("taken address: err = %v", err)
	}
}

var errs = Errors{Started: errors.New("started"), Closed: errors.New("closed"), NotStarted: errors.New("not started")}

func TestLifecycleStates(t *testing.T) {
	ctx := context.Background()
	l := NewLifecycle(errs)
	if err := l.Ready(ctx); !errors.Is(err, errs.NotStarted) {
		t.Errorf("Ready before Start = %v", err)
	}
	if err := l.Health(); err == nil {
		t.Error("healthy before Start")
	}
	if err := l.Start(ctx, func() error { return nil }, nil, func() { _ = l.Close(nil, nil) }); err != nil {
		t.Fatal(err)
	}
	if err := l.Ready(ctx); err != nil {
		t.Errorf("Ready = %v", err)
	}
	if !l.Served() {
		t.Error("Served after a successful Start is false")
	}
	if err := l.Health(); err != nil {
		t.Errorf("Health after Start = %v", err)
	}
	if err := l.Start(ctx, func() error { return nil }, nil, nil); !errors.Is(err, errs.Started) {
		t.Errorf("second Start = %v", err)
	}
	stopErr := errors.New("stop failed")
	calls := 0
	if err := l.Close(func() error { calls++; return stopErr }, nil); !errors.Is(err, stopErr) {
		t.Errorf("Close = %v, want the stop error", err)
	}
	if err := l.Close(func() error { calls++; return nil }, nil); !errors.Is(err, stopErr) || calls != 1 {
		t.Errorf("second Close = %v after %d stop calls, want the first error and one call", err, calls)
	}
	if err := l.Health(); err == nil || err.Error() != "shutting down" {
		t.Errorf("Health after Close = %v", err)
	}

	l2 := NewLifecycle(errs)
	_ = l2.Close(nil, nil)
	if err := l2.Start(ctx, func() error { t.Error("start ran after Close"); return nil }, nil, nil); !errors.Is(err, errs.Closed) {
		t.Errorf("Start after Close = %v", err)
	}

	var nilL *Lifecycle
	if err := nilL.Close(nil, nil); err != nil {
		t.Errorf("nil Close = %v", err)
	}
}

func TestLifecycleFailedStartUndoes(t *testing.T) {
	l := NewLifecycle(errs)
	boom := errors.New("boom")
	undone := false
	if err := l.Start(context.Background(), func() error { return boom }, func() { undone = true }, nil); !errors.Is(err, boom) {
		t.Fatalf("Start = %v", err)
	}
	if !undone {
		t.Error("undo did not run")
	}
	if l.Served() {
		t.Error("Served after a failed Start is true")
	}
	if err := l.Ready(context.Background()); !errors.Is(err, boom) {
		t.Errorf("Ready after a failed Start = %v", err)
	}
	_ = l.Close(nil, nil)
}

func TestLifecycleCloseWaitsAndContextCloses(t *testing.T) {
	l := NewLifecycle(errs)
	ctx, cancel := context.WithCancel(context.Background())
	var ended atomic.Bool
	var finished atomic.Bool
	closed := make(chan struct{})
	var a *Admin
	err := l.Start(ctx, func() error {
		l.Go(func() {
			<-l.Context().Done()
			time.Sleep(20 * time.Millisecond) // Close must wait for this
			ended.Store(true)
		})
		var err error
		a, err = l.StartAdmin(AdminOptions{Addr: "127.0.0.1:0"})
		return err
	}, nil, func() {
		defer close(closed)
		_ = l.Close(nil, func() error { finished.Store(ended.Load()); return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := get(t, "http://"+a.Addr().String()+"/healthz"); code != 200 {
		t.Errorf("/healthz of a started lifecycle: %d", code)
	}
	cancel()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the end of Start's ctx did not close the lifecycle")
	}
	if !finished.Load() {
		t.Error("finish ran before the goroutines ended")
	}
	if _, err := http.Get("http://" + a.Addr().String() + "/healthz"); err == nil {
		t.Error("admin server still answers after Close")
	}
}
