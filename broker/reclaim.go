package broker

import (
	"context"
	rtmetrics "runtime/metrics"
	"time"
)

// Memory is returned to the OS after a burst (a flood of connections or
// subscriptions, many sessions leaving at once) by reclaimMemory.
//
// The Go runtime collects garbage when the heap reaches its goal, which the
// last collection set from the heap live then, and returns free memory to
// the OS at a slow pace. After a burst an idle broker allocates next to
// nothing, so nothing reaches the goal: 200 clients that had subscribed to
// 1000 filters each left the broker at 800 MB of RSS for two minutes (until
// the runtime's periodic collection) and at 655 MB after it. So when no
// collection has run for reclaimInterval (the broker has gone quiet) and
// the heap, garbage and free memory not yet returned included, is at least
// reclaimMinBytes, reclaimMemory calls debug.FreeOSMemory (a collection,
// then all free memory back to the OS), once per quiet spell: again only
// after a collection has run on its own. Under load collections run on
// their own and it does nothing. 16 MiB, not more: 10 000 idle clients
// connecting at once left 18 MB free but not returned (1.8 KB per
// connection, as much again as their live state).
const (
	reclaimInterval = 10 * time.Second
	reclaimMinBytes = 16 << 20
)

// reclaimMemory runs until ctx ends; reclaim is debug.FreeOSMemory.
func reclaimMemory(ctx context.Context, interval time.Duration, minBytes uint64, reclaim func()) {
	samples := []rtmetrics.Sample{
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/memory/classes/heap/objects:bytes"}, // live and not yet collected
		{Name: "/memory/classes/heap/free:bytes"},    // free, not returned to the OS
	}
	read := func() (cycles, heap uint64, ok bool) {
		rtmetrics.Read(samples)
		for _, s := range samples {
			if s.Value.Kind() != rtmetrics.KindUint64 {
				return 0, 0, false // not provided by this runtime
			}
		}
		return samples[0].Value.Uint64(), samples[1].Value.Uint64() + samples[2].Value.Uint64(), true
	}
	cycles, _, ok := read()
	if !ok {
		return
	}
	q := newQuietSpell(interval, minBytes, cycles, time.Now())
	// Polled five times per interval, so memory goes back about interval
	// after the last collection, not up to twice that.
	t := time.NewTicker(max(interval/5, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cycles, heap, _ := read()
		if q.due(cycles, heap, time.Now()) {
			reclaim()
			cycles, _, _ = read()
			q.reclaimed(cycles) // its own collection is not the runtime's
		}
	}
}

// quietSpell decides, from samples of the collector's cycle count and the
// heap's size, when the broker has gone quiet with memory to give back:
// no collection for interval and a heap of at least minBytes; then once,
// until a collection runs on its own again.
type quietSpell struct {
	interval time.Duration
	minBytes uint64
	cycles   uint64    // at the last sample
	since    time.Time // of the last collection seen
	done     bool      // reclaimed in this quiet spell
}

func newQuietSpell(interval time.Duration, minBytes, cycles uint64, now time.Time) *quietSpell {
	return &quietSpell{interval: interval, minBytes: minBytes, cycles: cycles, since: now}
}

// due takes one sample and reports whether to reclaim now.
func (q *quietSpell) due(cycles, heap uint64, now time.Time) bool {
	if cycles != q.cycles {
		q.cycles, q.since, q.done = cycles, now, false // the runtime collects on its own: not quiet
		return false
	}
	return !q.done && heap >= q.minBytes && now.Sub(q.since) >= q.interval
}

// reclaimed records a reclaim, after which the collector's count was cycles.
func (q *quietSpell) reclaimed(cycles uint64) {
	q.cycles, q.done = cycles, true
}
