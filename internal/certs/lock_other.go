//go:build !unix

package certs

// lockDir is a no-op where flock is unavailable; files are still replaced
// atomically.
func lockDir(dir string) (func(), error) { return func() {}, nil }
