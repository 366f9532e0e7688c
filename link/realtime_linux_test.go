package link

import (
	"errors"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestProcessRaiser: every thread of the process runs SCHED_RR while the
// raiser runs (round-robin: see setThreadRealTime), except the exempt one;
// Stop returns them to normal.
func TestProcessRaiser(t *testing.T) {
	r, err := RaiseProcess()
	if errors.Is(err, syscall.EPERM) {
		t.Skipf("no real-time priority here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	exempt := make(chan int)
	release := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		r.ExemptThisThread()
		exempt <- unix.Gettid()
		<-release
	}()
	tid := <-exempt
	defer close(release)
	// New threads are raised within a second.
	deadline := time.Now().Add(5 * time.Second)
	for {
		normal := 0
		for _, t := range threadIDs() {
			if pol, err := threadPolicy(t); err == nil && pol == unix.SCHED_NORMAL && t != tid {
				normal++
			}
		}
		if normal == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d threads still SCHED_NORMAL after 5 s", normal)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if pol, err := threadPolicy(tid); err != nil || pol != unix.SCHED_NORMAL {
		t.Fatalf("exempt thread has policy %d (err %v), want SCHED_NORMAL", pol, err)
	}
	for _, t2 := range threadIDs() {
		if pol, err := threadPolicy(t2); err == nil && pol == unix.SCHED_FIFO {
			t.Errorf("thread %d raised to SCHED_FIFO, want SCHED_RR (equal-priority spinning threads must be time-sliced)", t2)
		}
	}
	// Stop may be called twice and concurrently (an interrupt and the
	// caller's deferred Stop).
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(r.Stop)
	}
	wg.Wait()
	r.Stop()
	for _, t2 := range threadIDs() {
		if pol, err := threadPolicy(t2); err == nil && pol != unix.SCHED_NORMAL {
			t.Errorf("thread %d still has policy %d after Stop", t2, pol)
		}
	}
}
