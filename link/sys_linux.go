package link

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// openTUN creates a TUN device (IFF_TUN|IFF_NO_PI) whose name the kernel
// picks from pattern (for example "iotq%d"). The fd is non-blocking before
// it is wrapped, so Go's poller drives reads and Close unblocks them.
func openTUN(pattern string) (*os.File, string, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, "", fmt.Errorf("%w: /dev/net/tun is missing (load the tun module: modprobe tun)", ErrNoTUN)
		}
		return nil, "", fmt.Errorf("%w: open /dev/net/tun: %v", ErrNoTUN, err)
	}
	ifr, err := unix.NewIfreq(pattern)
	if err != nil {
		unix.Close(fd)
		return nil, "", fmt.Errorf("tun name %q: %w", pattern, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, "", fmt.Errorf("create tun %q: %w", pattern, err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, "", fmt.Errorf("tun non-blocking: %w", err)
	}
	name := ifr.Name()
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+name), name, nil
}

// monoNow reads CLOCK_MONOTONIC, the clock of the model and of the timerfd.
func monoNow() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) // cannot fail for this clock
	return time.Duration(ts.Nano())
}

// timer is a blocking CLOCK_MONOTONIC timerfd armed at absolute times.
type timer struct{ fd int }

func newTimer() (*timer, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("timerfd: %w", err)
	}
	return &timer{fd: fd}, nil
}

// arm sets the timer to fire at the absolute monotonic time at (> 0).
func (t *timer) arm(at time.Duration) {
	at = max(at, 1)
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(at))}
	_ = unix.TimerfdSettime(t.fd, unix.TFD_TIMER_ABSTIME, &spec, nil) // valid fd and spec
}

// wait blocks the calling OS thread until the timer fires.
func (t *timer) wait() error {
	var buf [8]byte
	for {
		_, err := unix.Read(t.fd, buf[:])
		if err == unix.EINTR {
			continue
		}
		return err
	}
}

func (t *timer) close() { unix.Close(t.fd) }

// setRealTime asks for SCHED_FIFO priority prio for the calling thread.
func setRealTime(prio uint32) error {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: prio, Flags: unix.SCHED_FLAG_RESET_ON_FORK}
	return unix.SchedSetAttr(0, &attr, 0)
}

// pidAlive reports whether a process with this pid exists.
func pidAlive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
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

// pidReused reports whether process pid started after the file at path
// was created: then pid belongs to another process than the one that made
// the file (a namespace left by a crash whose pid was reused).
func pidReused(pid int, path string) bool {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return false
	}
	created := time.Unix(st.Mtim.Unix())
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// Field 22 (starttime, clock ticks since boot) follows the ")" of comm.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return false
	}
	ticks, err := strconv.ParseInt(f[19], 10, 64)
	if err != nil {
		return false
	}
	boot := bootTime()
	if boot.IsZero() {
		return false
	}
	const clkTck = 100 // USER_HZ on Linux
	started := boot.Add(time.Duration(ticks) * time.Second / clkTck)
	return started.After(created.Add(2 * time.Second)) // btime has 1 s resolution
}

// bootTime reads btime from /proc/stat.
func bootTime() time.Time {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return time.Unix(sec, 0)
			}
		}
	}
	return time.Time{}
}
