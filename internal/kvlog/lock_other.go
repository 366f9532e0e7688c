//go:build !unix

package kvlog

import "os"

// lock does nothing where flock is not available.
func lock(*os.File) error { return nil }
