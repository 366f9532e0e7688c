package link

import "errors"

// Sentinel errors; wrapped errors carry the details and the fix.
var (
	// ErrNotRoot: creating namespaces and TUN devices needs root (CAP_NET_ADMIN).
	ErrNotRoot = errors.New("link emulation needs root (CAP_NET_ADMIN)")
	// ErrNoTUN: /dev/net/tun cannot be opened.
	ErrNoTUN = errors.New("link emulation needs /dev/net/tun")
	// ErrNoIP: the ip command (iproute2) is missing.
	ErrNoIP = errors.New("link emulation needs the ip command (iproute2)")
	// ErrNameInUse: a namespace with the name this run wanted exists.
	ErrNameInUse = errors.New("name already in use")
	// ErrUnknownNode: a node or link name that the topology does not have.
	ErrUnknownNode = errors.New("unknown node")
	// ErrClosed: the network was closed.
	ErrClosed = errors.New("network closed")
)
