// The forwarding thread's clock: CLOCK_MONOTONIC and an absolute timerfd.

package link

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

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
