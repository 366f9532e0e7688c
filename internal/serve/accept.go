package serve

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"time"
)

// Acceptor is what AcceptLoop accepts from (transport.Listener is one).
type Acceptor interface {
	Accept(ctx context.Context) (net.Conn, error)
}

// Bounds of the pause after a failed Accept: it starts at minBackoff,
// doubles with each failure in a row, stays at maxBackoff and starts over
// after a success.
const (
	minBackoff = 5 * time.Millisecond
	maxBackoff = time.Second
)

// AcceptLoop accepts connections from l and hands each to handle until ctx
// ends, l is closed or handle returns false. handle runs on the loop's
// goroutine, so it must not block (it starts the connection's goroutine).
// A failed Accept is logged at Warn (key "error") and retried after a
// pause (minBackoff doubling to maxBackoff).
func AcceptLoop(ctx context.Context, l Acceptor, log *slog.Logger, handle func(net.Conn) bool) {
	backoff := minBackoff
	for {
		c, err := l.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			log.Warn("accept failed", "error", err)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff = minBackoff
		if !handle(c) {
			return
		}
	}
}
