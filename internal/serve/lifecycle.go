package serve

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
)

// Errors are the sentinel errors a Lifecycle returns, so that callers of
// its owner test them with the owner's names (broker.ErrClosed).
type Errors struct {
	Started    error // a second Start
	Closed     error // Start after Close
	NotStarted error // Ready before Start
}

// Lifecycle is the state every server goes through: new, started (ready
// or failed), closed. It owns the serving context (ended by Close), the
// goroutines Close waits for, and the admin server. Safe for concurrent
// use.
type Lifecycle struct {
	errs   Errors
	ctx    context.Context // the serving context, cancelled by Close
	cancel context.CancelFunc

	mu       sync.Mutex
	started  bool
	closed   bool
	admin    *Admin
	ready    chan struct{} // closed when Start returned
	startErr error         // set before ready is closed

	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// NewLifecycle returns a Lifecycle that has not started.
func NewLifecycle(errs Errors) *Lifecycle {
	for _, e := range []*error{&errs.Started, &errs.Closed, &errs.NotStarted} {
		if *e == nil {
			*e = errors.New("server: wrong state")
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Lifecycle{errs: errs, ctx: ctx, cancel: cancel, ready: make(chan struct{})}
}

// Context is the serving context: it ends when Close begins.
func (l *Lifecycle) Context() context.Context { return l.ctx }

// Start runs start once and marks the server ready (or failed, with
// start's error) for Ready. It refuses after Close (Errors.Closed) and a
// second time (Errors.Started). While start runs, Start holds the
// Lifecycle's lock: start may call Go, Serve and StartAdmin but not Close.
// If start fails, undo runs (close what start opened) and the error is
// returned. When ctx ends, closeFn runs on a goroutine of its own (the
// owner's Close, which waits for the goroutines of the Lifecycle).
func (l *Lifecycle) Start(ctx context.Context, start func() error, undo func(), closeFn func()) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.errs.Closed
	}
	if l.started {
		return l.errs.Started
	}
	l.started = true
	err := start()
	if err != nil {
		l.startErr = err
		if undo != nil {
			undo()
		}
	} else {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			select {
			case <-ctx.Done():
				go closeFn() // closeFn waits for this goroutine: do not block it.
			case <-l.ctx.Done():
			}
		}()
	}
	close(l.ready)
	return err
}

// Go runs f on a goroutine that Close waits for.
func (l *Lifecycle) Go(f func()) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		f()
	}()
}

// Add counts one goroutine that Close waits for, started by the caller,
// which calls Done when it ends (for goroutines whose end is a callback).
func (l *Lifecycle) Add() { l.wg.Add(1) }

// Done ends a goroutine counted by Add.
func (l *Lifecycle) Done() { l.wg.Done() }

// Serve runs AcceptLoop on a from the serving context, on a goroutine
// that Close waits for.
func (l *Lifecycle) Serve(a Acceptor, log *slog.Logger, handle func(net.Conn) bool) {
	l.Go(func() { AcceptLoop(l.ctx, a, log, handle) })
}

// StartAdmin starts the admin server (StartAdmin) that Close closes; a nil
// o.Health reports Health. Call it from the start function of Start (it
// relies on Start's lock), at most once.
func (l *Lifecycle) StartAdmin(o AdminOptions) (*Admin, error) {
	if o.Health == nil {
		o.Health = l.Health
	}
	a, err := StartAdmin(o)
	if err != nil {
		return nil, err
	}
	l.admin = a
	return a, nil
}

// AdminAddr is the bound address of the admin server (nil if none).
func (l *Lifecycle) AdminAddr() net.Addr {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.admin.Addr()
}

// Started reports whether Start was called (whatever its outcome).
func (l *Lifecycle) Started() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.started
}

// Served reports whether Start succeeded: the server has accepted
// connections and has something to say when it stops.
func (l *Lifecycle) Served() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.started && l.startErr == nil && l.readyClosed()
}

// readyClosed reports whether Start has returned. The caller holds l.mu.
func (l *Lifecycle) readyClosed() bool {
	select {
	case <-l.ready:
		return true
	default:
		return false
	}
}

// Closed reports whether Close has begun.
func (l *Lifecycle) Closed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// Ready waits until Start has returned: nil if it succeeded, its error if
// not, Errors.NotStarted before Start, ctx's error if ctx ends first.
func (l *Lifecycle) Ready(ctx context.Context) error {
	if !l.Started() {
		return l.errs.NotStarted
	}
	select {
	case <-l.ready:
		return l.startErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Health is what /healthz answers by default: an error while starting
// and once Close has begun.
func (l *Lifecycle) Health() error {
	select {
	case <-l.ready:
	default:
		return errStarting
	}
	if l.Closed() {
		return errShuttingDown
	}
	return nil
}

var (
	errStarting     = errors.New("starting")
	errShuttingDown = errors.New("shutting down")
)

// Close runs once: it marks the server closed (Start refuses, Health
// reports shutting down), cancels the serving context, runs stop (the
// owner closes its listeners and tells its connections to go), closes the
// admin server, waits for every goroutine of the Lifecycle, then runs
// finish (the owner releases what outlives the connections, e.g. a store).
// It returns the errors of stop and finish joined; later calls return the
// same. Safe on a nil Lifecycle; stop and finish may be nil.
func (l *Lifecycle) Close(stop, finish func() error) error {
	if l == nil {
		return nil
	}
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		admin := l.admin
		l.mu.Unlock()
		l.cancel()
		var errs []error
		if stop != nil {
			errs = append(errs, stop())
		}
		admin.Close()
		l.wg.Wait()
		if finish != nil {
			errs = append(errs, finish())
		}
		l.closeErr = errors.Join(errs...)
	})
	return l.closeErr
}
