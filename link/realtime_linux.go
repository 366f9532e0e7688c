// Real-time priority (SCHED_FIFO) for the forwarding thread and, on
// request, for the rest of the process.

package link

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// RealTime reports whether the forwarding thread got SCHED_FIFO, and why not.
func (n *Network) RealTime() (bool, error) {
	n.rtMu.Lock()
	defer n.rtMu.Unlock()
	return n.rtOK, n.rtErr
}

// raiseThreads keeps every thread of the process at SCHED_FIFO 40 until
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

// setThreadRealTime gives thread tid SCHED_FIFO priority prio with
// reset-on-fork, so processes and threads it creates start as normal tasks.
func setThreadRealTime(tid int, prio uint32) error {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: prio, Flags: unix.SCHED_FLAG_RESET_ON_FORK}
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
