package broker

import "errors"

// Sentinel errors.
var (
	// ErrClosed is returned by Start after Close.
	ErrClosed = errors.New("broker closed")
	// ErrStarted is returned by a second Start.
	ErrStarted = errors.New("broker already started")
	// ErrNotStarted is returned by Ready before Start.
	ErrNotStarted = errors.New("broker not started")
	// ErrAddressInUse: a listen address is already taken by another process.
	ErrAddressInUse = errors.New("listen address already in use")
)
