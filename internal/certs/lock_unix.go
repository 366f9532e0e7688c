//go:build unix

package certs

import (
	"fmt"
	"os"
	"syscall"
)

// lockDir takes an exclusive advisory lock on dir/.lock and returns the
// function that releases it.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(dir+"/.lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
