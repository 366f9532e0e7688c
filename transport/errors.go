package transport

import "errors"

// Sentinel errors. Errors returned by this package wrap them where they
// apply, with the URL and what to do as context.
var (
	// ErrTLSConfigRequired: mqtts, wss and quic listeners need a server
	// certificate (ListenOptions.TLSConfig).
	ErrTLSConfigRequired = errors.New("tls config with a server certificate required")
	// ErrNoHost: Dial needs a host in the URL.
	ErrNoHost = errors.New("no host in URL")
	// ErrNotBinary: a WebSocket peer sent a non-binary data frame, which
	// MQTT forbids [MQTT-6.0.0-1].
	ErrNotBinary = errors.New("websocket peer sent a non-binary data frame")
)
