package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// signalContext is cancelled by the first SIGINT or SIGTERM, which asks the
// command to stop cleanly (a campaign ends its cells and keeps its records,
// a broker closes its listeners). The second one takes the signal's default
// action and the process exits at once: an operator can always end a
// command whose clean stop hangs, at the price of what the clean stop would
// have done (a lab run's namespaces then stay behind: iotq link down
// --prefix iotqlab- removes them).
func signalContext() (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	release := context.AfterFunc(ctx, stop)
	return ctx, func() {
		release()
		stop()
	}
}
