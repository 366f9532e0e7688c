//go:build unix

package kvlog

import (
	"os"
	"syscall"
)

// lock takes an exclusive advisory lock on f, without waiting: two
// writers appending to one log would interleave their batches.
func lock(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
