package lab

import "errors"

// Sentinel errors.
var (
	// ErrNotReady: a node process did not write its ready file in time.
	ErrNotReady = errors.New("node not ready")
	// ErrNodeExited: a node process exited before it should have.
	ErrNodeExited = errors.New("node process exited early")
	// ErrStalled: a stop-and-wait repetition got no receipt in time.
	ErrStalled = errors.New("stop-and-wait stalled")
	// ErrUnknownScenario: a scenario argument is neither a built-in name
	// nor an existing file.
	ErrUnknownScenario = errors.New("unknown scenario")
)
