package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// Admin HTTP server timeouts. The header timeout bounds a client that
// opens a connection and sends nothing (the stricter of the values the
// broker and the gateway had); the shutdown grace lets a scrape in flight
// finish.
const (
	adminReadHeaderTimeout = 5 * time.Second
	adminShutdownGrace     = time.Second
)

// AdminOptions configures StartAdmin.
type AdminOptions struct {
	// Addr is the HOST:PORT to listen on (port 0: any free port).
	Addr string
	// Metrics serves /metrics.
	Metrics http.Handler
	// Health answers /healthz: nil is 200 "ok", an error is 503 with the
	// error's text. A nil Health is always healthy.
	Health func() error
	// Pprof serves net/http/pprof under /debug/pprof/.
	Pprof bool
	// Logger receives a failure of the server after it started.
	Logger *slog.Logger
}

// Admin is a running admin HTTP server.
type Admin struct {
	srv  *http.Server
	addr net.Addr
	done chan struct{} // closed when Serve has returned
}

// StartAdmin listens on o.Addr and serves /metrics, /healthz and pprof (if
// asked for) on a goroutine until Close.
func StartAdmin(o AdminOptions) (*Admin, error) {
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener %s: %w (want HOST:PORT, e.g. 127.0.0.1:9100)", o.Addr, err)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	if o.Metrics != nil {
		mux.Handle("/metrics", o.Metrics)
	}
	health := o.Health
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if health != nil {
			if err := health(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	if o.Pprof {
		// Registered on our mux: net/http/pprof's own registration is on
		// http.DefaultServeMux, which nothing here serves.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	a := &Admin{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: adminReadHeaderTimeout},
		addr: ln.Addr(),
		done: make(chan struct{}),
	}
	go func() {
		defer close(a.done)
		if err := a.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server failed", "error", err)
		}
	}()
	return a, nil
}

// Addr is the bound address (nil on a nil Admin).
func (a *Admin) Addr() net.Addr {
	if a == nil {
		return nil
	}
	return a.addr
}

// Close shuts the server down, giving requests in flight a short grace,
// and waits for its goroutine. Safe on a nil Admin and more than once.
func (a *Admin) Close() {
	if a == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminShutdownGrace)
	_ = a.srv.Shutdown(ctx)
	cancel()
	<-a.done
}
