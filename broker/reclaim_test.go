package broker

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/iotq/iotq/internal/testutil"
)

// TestReclaimMemory: after a burst, once the process is quiet (no garbage
// collection of its own), reclaimMemory returns memory once; while
// collections keep running (load) it does nothing.
func TestReclaimMemory(t *testing.T) {
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

	// Load: collections run on their own, every interval.
	sink := make([][]byte, 4)
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
		for i := range 64 {
			sink[i%len(sink)] = make([]byte, 1<<20)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("reclaimed %d times while collections ran on their own", n)
	}

	// A burst: 128 MiB live through a collection (which sets the heap goal
	// past 256 MiB, as a flood does), then garbage, then quiet: nothing
	// brings the heap to its goal.
	burst := make([][]byte, 128)
	for i := range burst {
		burst[i] = make([]byte, 1<<20)
	}
	runtime.GC()
	runtime.KeepAlive(burst)
	sink, burst = nil, nil
	deadline := time.Now().Add(testutil.Scale(5 * time.Second))
	for calls.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("memory not reclaimed after a burst")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // still quiet: not again
	if n := calls.Load(); n != 1 {
		t.Errorf("reclaimed %d times in one quiet spell, want 1", n)
	}
	_, _ = sink, burst
}
