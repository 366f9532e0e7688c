package testutil

import "sync"

// SyncBuffer collects a child process's output while a test reads it: safe
// for one writer and concurrent readers.
type SyncBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *SyncBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	return len(p), nil
}

// String returns what was written so far.
func (l *SyncBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}
