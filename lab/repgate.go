package lab

import (
	"context"
	"time"
)

// Admission per repetition. A cell runs its repetitions one after the
// other on one network; with the studies' 5 to 50 repetitions a cell lasts
// an hour or more, and a lowered limit would take effect only as whole
// cells end: on a host that stays too late with the cells running, every
// started cell would run all its repetitions at the concurrency that made
// it late. So between two repetitions a cell gives its slot back and waits
// until the admission control lets it run again: a cell that has begun
// goes before a cell that has not, and a lowered limit holds within one
// repetition.

// repGateKey is the context key of a cell's repetition gate.
type repGateKey struct{}

// repGate waits until the cell may run its next repetition; it returns
// the context's error when the cell is cancelled meanwhile.
type repGate func(ctx context.Context) error

// withRepGate returns ctx carrying g for the runner.
func withRepGate(ctx context.Context, g repGate) context.Context {
	return context.WithValue(ctx, repGateKey{}, g)
}

// waitRepGate waits at ctx's repetition gate; without one (a campaign
// without a timing guard, a runner called directly) it returns at once.
func waitRepGate(ctx context.Context) error {
	if g, ok := ctx.Value(repGateKey{}).(repGate); ok && g != nil {
		return g(ctx)
	}
	return ctx.Err()
}

// gateRequest is a cell between two repetitions asking to go on: the
// scheduler closes grant when it may.
type gateRequest struct {
	grant chan struct{}
}

// gateFor returns the repetition gate of the cells of r: it hands a
// request to Run's goroutine (which counts the cell as not running until
// it grants it) and waits for the grant.
func (r *campaignRun) gateFor() repGate {
	return func(ctx context.Context) error {
		req := gateRequest{grant: make(chan struct{})}
		select {
		case r.gates <- req:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case <-req.grant:
			return ctx.Err() // a grant that won the race with a cancellation
		case <-ctx.Done():
			// Granted or not, the cell ends and reports: a grant made
			// after this counted it as running until then.
			return ctx.Err()
		}
	}
}

// gate takes a cell's request between two repetitions: the cell stops
// counting as running until grantWaiting lets it go on (after the
// admission control has judged the window). Only Run's goroutine calls
// it; grantWaiting tells the admission control the count that results.
func (r *campaignRun) gate(req gateRequest) {
	r.running--
	r.waiting = append(r.waiting, req)
}

// grantWaiting lets waiting cells go on, first come first served, while
// the admitted limit allows; cells that have begun go before new ones.
// Once the cells are cancelled every waiting cell is let go: it ends at
// once and reports, and record counts it out as a running cell.
//
// It first takes the requests already sent (r.gates has room for one per
// cell that may run, so a cell never waits to be heard): the scheduler
// then sees them before it starts a new cell.
func (r *campaignRun) grantWaiting() {
	before := r.running
	for taken := false; !taken; {
		select {
		case req := <-r.gates:
			r.gate(req)
		default:
			taken = true
		}
	}
	cancelled := r.cancelled()
	for len(r.waiting) > 0 && (r.running < r.limit() || cancelled) {
		req := r.waiting[0]
		r.waiting[0] = gateRequest{}
		r.waiting = r.waiting[1:]
		r.running++
		close(req.grant)
	}
	if r.adm != nil && r.running != before {
		r.adm.observe(time.Now(), r.running)
	}
}

// cancelled reports whether the cells' context is done.
func (r *campaignRun) cancelled() bool {
	select {
	case <-r.cellsDone:
		return true
	default:
		return false
	}
}
