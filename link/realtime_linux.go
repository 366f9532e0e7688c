// Real-time priority for the forwarding thread (SCHED_FIFO) and, on
// request, for the rest of the process (SCHED_RR).

package link

import (
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// RealTime reports whether the forwarding thread got SCHED_FIFO, and why not.
func (n *Network) RealTime() (bool, error) {
	n.rtMu.Lock()
	defer n.rtMu.Unlock()
	return n.rtOK, n.rtErr
}

// raiseThreads keeps every thread of the process at SCHED_RR 40 until
// the network closes, then returns the threads it raised to normal.
func (n *Network) raiseThreads() {
	defer n.wg.Done()
	raised := map[int]bool{}
	n.rtMu.Lock()
	fwd := n.rtTid
	n.rtMu.Unlock()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		for _, tid := range threadIDs() {
			if tid == fwd || raised[tid] {
				continue
			}
			if pol, err := threadPolicy(tid); err != nil || pol != unix.SCHED_NORMAL {
				continue
			}
			if err := setThreadRealTime(tid, 40); err == nil {
				raised[tid] = true
			}
		}
		select {
		case <-n.stop:
			for tid := range raised {
				_ = setThreadNormal(tid) // the thread may be gone
			}
			return
		case <-tick.C:
		}
	}
}

// setRealTime asks for SCHED_FIFO priority prio for the calling thread.
func setRealTime(prio uint32) error {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: prio, Flags: unix.SCHED_FLAG_RESET_ON_FORK}
	return unix.SchedSetAttr(0, &attr, 0)
}

// setThreadRealTime gives thread tid SCHED_RR priority prio with
// reset-on-fork, so processes and threads it creates start as normal tasks.
//
// Round-robin, not FIFO: the Go runtime's threads wait for each other in
// spin loops that never sleep (a finalizer's removal waits with sched_yield
// for another thread to finish sweeping the span; the background sweeper
// retries under a runtime lock). SCHED_FIFO never takes the CPU from a
// spinning thread, and sched_yield gives it only to a thread queued on the
// same CPU: with both CPUs of the host spinning, the thread they waited
// for, runnable at the same priority, never ran. A lab campaign (E6, seed
// 6, 2026-11-27) sat at two full CPUs for 16 minutes with nothing done;
// perf showed os/exec's Close in runtime.removespecial -> osyield on one
// CPU and runtime.bgsweep in lock2/unlock2 on the other. SCHED_RR
// time-slices threads of equal priority (sched_rr_timeslice_ms, 100 ms
// by default), so such a wait ends within a slice.
func setThreadRealTime(tid int, prio uint32) error {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_RR, Priority: prio, Flags: unix.SCHED_FLAG_RESET_ON_FORK}
	return unix.SchedSetAttr(tid, &attr, 0)
}

// setThreadNormal returns thread tid to SCHED_NORMAL.
func setThreadNormal(tid int) error {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}
	return unix.SchedSetAttr(tid, &attr, 0)
}

// threadPolicy returns the scheduling policy of thread tid.
func threadPolicy(tid int) (uint32, error) {
	attr, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return 0, err
	}
	return attr.Policy, nil
}

// threadIDs lists the threads of this process.
func threadIDs() []int {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil
	}
	out := make([]int, 0, len(ents))
	for _, e := range ents {
		var tid int
		if _, err := fmt.Sscan(e.Name(), &tid); err == nil {
			out = append(out, tid)
		}
	}
	return out
}

// ProcessRaiser keeps every thread of this process at SCHED_RR
// priority 40 while it runs (forwarding threads keep their 50), with
// reset-on-fork so child processes start as normal tasks. A process that
// hosts many networks at once (a lab campaign with --jobs) needs it: Go
// code of one network's forwarding thread waits for any thread of the
// process that the runtime stops or hands work to (garbage collection,
// the readers), and under a load of dozens of node processes a
// normal-priority thread can wait hundreds of milliseconds for a CPU.
// Options.RealTimeProcess does the same for one network.
type ProcessRaiser struct {
	once   sync.Once
	mu     sync.Mutex
	exempt map[int]bool
	raised map[int]bool
	stop   chan struct{}
	done   chan struct{}
}

// RaiseProcess raises the threads of this process now and every second
// until Stop, which returns them to SCHED_NORMAL. It fails when the
// process may not use real-time priority (not root, or RT limits).
func RaiseProcess() (*ProcessRaiser, error) {
	if err := setThreadRealTime(unix.Gettid(), 40); err != nil {
		return nil, fmt.Errorf("sched_setattr SCHED_RR: %w", err)
	}
	r := &ProcessRaiser{exempt: map[int]bool{}, raised: map[int]bool{unix.Gettid(): true},
		stop: make(chan struct{}), done: make(chan struct{})}
	r.raise()
	go r.run()
	return r, nil
}

// ExemptThisThread keeps the calling thread (and returns it) at
// SCHED_NORMAL: for a probe that stands for the scheduling delay of
// ordinary processes. The caller must have locked its goroutine to the
// thread (runtime.LockOSThread).
func (r *ProcessRaiser) ExemptThisThread() {
	tid := unix.Gettid()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exempt[tid] = true
	if r.raised[tid] {
		_ = setThreadNormal(tid)
		delete(r.raised, tid)
	}
}

func (r *ProcessRaiser) raise() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, tid := range threadIDs() {
		if r.exempt[tid] || r.raised[tid] {
			continue
		}
		if pol, err := threadPolicy(tid); err != nil || pol != unix.SCHED_NORMAL {
			continue
		}
		if err := setThreadRealTime(tid, 40); err == nil {
			r.raised[tid] = true
		}
	}
}

func (r *ProcessRaiser) run() {
	defer close(r.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-tick.C:
			r.raise()
		}
	}
}

// Stop ends the raising and returns the raised threads that still exist
// to SCHED_NORMAL. It may be called more than once, from any goroutine:
// an interrupted campaign lowers its threads at once (its teardown must
// not keep ordinary processes, such as the ip commands it waits for, off
// the CPUs), and again when it returns.
func (r *ProcessRaiser) Stop() {
	if r == nil {
		return
	}
	r.once.Do(func() {
		close(r.stop)
		<-r.done
		r.mu.Lock()
		defer r.mu.Unlock()
		for tid := range r.raised {
			_ = setThreadNormal(tid) // the thread may be gone
		}
		r.raised = map[int]bool{}
	})
}
