package serve

import (
	"os"
	"path/filepath"
)

// DefaultStateDir is the state directory of a server given none (broker
// and gateway alike): $XDG_STATE_HOME/iotq, else ~/.local/state/iotq,
// else a directory under os.TempDir().
func DefaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "iotq")
	}
	if h, err := os.UserHomeDir(); err == nil && h != "" {
		return filepath.Join(h, ".local", "state", "iotq")
	}
	return filepath.Join(os.TempDir(), "iotq-state")
}
