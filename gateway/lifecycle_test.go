package gateway

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/iotq/iotq/records"
)

// lockedBuf is a log sink safe for the gateway's goroutines.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuf) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// TestLifecycleLikeTheBroker: the gateway goes through the states of the
// shared skeleton (internal/serve) as the broker does: Ready before Start
// fails with ErrNotStarted and after it succeeds; a second Start is
// ErrStarted; the ready file names the real endpoint; Close is idempotent
// and nil-safe; /healthz says "shutting down" once Close began; a gateway
// that never served does not log "gateway stopped".
func TestLifecycleLikeTheBroker(t *testing.T) {
	up := startTCP(t, echoID("a"))
	var logs lockedBuf
	ready := filepath.Join(t.TempDir(), "ready.json")
	g, err := New(Options{Routes: []Route{{Listen: "quic://127.0.0.1:0", Upstreams: []string{"tcp://" + up.l.Addr().String()}}}, StateDir: t.TempDir(),
		Metrics: "127.0.0.1:0", ReadyFile: ready, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := g.Ready(ctx); !errors.Is(err, ErrNotStarted) {
		t.Errorf("Ready before Start = %v, want ErrNotStarted", err)
	}
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Ready(ctx); err != nil {
		t.Errorf("Ready after Start = %v", err)
	}
	if err := g.Start(ctx); !errors.Is(err, ErrStarted) {
		t.Errorf("second Start = %v, want ErrStarted", err)
	}
	b, err := os.ReadFile(ready)
	if err != nil {
		t.Fatal(err)
	}
	r, err := records.ParseBrokerReady(b)
	if err != nil || r.Listeners[0] != g.Endpoints()[0] || r.PID != os.Getpid() || r.CAFile != g.CAFile() {
		t.Errorf("ready file %+v (%v), want %v", r, err, g.Endpoints())
	}
	if err := g.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if err := g.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if err := g.Start(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close = %v, want ErrClosed", err)
	}
	if _, err := http.Get("http://" + g.MetricsAddr().String() + "/healthz"); err == nil {
		t.Error("metrics server answers after Close")
	}
	if n := strings.Count(logs.String(), "gateway stopped"); n != 1 {
		t.Errorf(`"gateway stopped" logged %d times, want once:\n%s`, n, logs.String())
	}
	var nilG *Gateway
	if err := nilG.Close(); err != nil {
		t.Errorf("Close of a nil *Gateway = %v", err)
	}

	// Never started (iotq gateway --check): nothing to say on Close.
	logs = lockedBuf{}
	g2, err := New(Options{Routes: []Route{{Listen: "quic://127.0.0.1:0", Upstreams: []string{"tcp://" + up.l.Addr().String()}}}, StateDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	_ = g2.Close()
	if strings.Contains(logs.String(), "gateway stopped") {
		t.Errorf("a gateway that never served logged:\n%s", logs.String())
	}
}
