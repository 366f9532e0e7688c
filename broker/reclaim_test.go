package broker

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iotq/iotq/internal/testutil"
)

// TestQuietSpell: memory goes back once per quiet spell (no collection of
// the runtime's own for the interval, heap at least minBytes), never while
// collections keep running (load), and again only after one ran on its own.
func TestQuietSpell(t *testing.T) {
	const mib = 1 << 20
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	q := newQuietSpell(50*time.Millisecond, 64*mib, 7, t0)

	// Load: a collection every 10 ms, however long the run.
	for i := 1; i <= 100; i++ {
		if q.due(uint64(7+i), 200*mib, at(10*i)) {
			t.Fatalf("reclaim due at %d ms while collections run every 10 ms", 10*i)
		}
	}
	// Quiet from 1000 ms on (cycle 107): not before 50 ms have passed.
	if q.due(107, 200*mib, at(1049)) {
		t.Fatal("reclaim due 49 ms into a quiet spell of 50")
	}
	// A small heap is left alone.
	if q.due(107, 10*mib, at(1060)) {
		t.Fatal("reclaim due for a heap under minBytes")
	}
	if !q.due(107, 200*mib, at(1060)) {
		t.Fatal("no reclaim 60 ms into a quiet spell with a 200 MiB heap")
	}
	q.reclaimed(108) // FreeOSMemory's own collection
	for ms := 1070; ms <= 3000; ms += 10 {
		if q.due(108, 200*mib, at(ms)) {
			t.Fatalf("reclaim due again at %d ms in the same quiet spell", ms)
		}
	}
	// The runtime collects on its own (a new burst), then goes quiet.
	if q.due(109, 300*mib, at(3010)) {
		t.Fatal("reclaim due on the sample that saw a collection")
	}
	if !q.due(109, 300*mib, at(3060)) {
		t.Fatal("no reclaim in the next quiet spell")
	}
}

// TestReclaimMemoryAfterBurst: the loop reads the runtime's metrics and
// reclaims once a burst's garbage sits in a quiet heap.
func TestReclaimMemoryAfterBurst(t *testing.T) {
	var calls atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		reclaimMemory(ctx, 50*time.Millisecond, 64<<20, func() { calls.Add(1) })
	}()
	defer func() {
		cancel()
		<-done
	}()

	// 128 MiB live through a collection (which sets the heap goal past
	// 256 MiB, as a flood does), then garbage, then quiet: nothing brings
	// the heap to its goal.
	burst := make([][]byte, 128)
	for i := range burst {
		burst[i] = make([]byte, 1<<20)
	}
	runtime.GC()
	runtime.KeepAlive(burst)
	burst = nil
	deadline := time.Now().Add(testutil.Scale(5 * time.Second))
	for calls.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("memory not reclaimed after a burst")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = burst
}
