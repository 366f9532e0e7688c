package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/quic-go/quic-go"
)

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
	// ErrTransportNotBuilt: the scheme table knows the transport (for
	// example udp, dtls) but this package cannot dial or listen on it yet.
	ErrTransportNotBuilt = errors.New("transport not built into iotq's transport package yet")
)

// Kinds of dial failure; a *DialError wraps one of them (errors.Is).
var (
	ErrRefused     = errors.New("connection refused")
	ErrUnreachable = errors.New("host or network unreachable")
	ErrUnknownHost = errors.New("unknown host")
	ErrTimeout     = errors.New("no answer in time")
	ErrCertificate = errors.New("server certificate not accepted")
	ErrALPN        = errors.New("server does not speak the application protocol")
)

// DialError is a failed Dial: the endpoint, the kind of failure (one of
// the Err* kinds above, or nil when unclassified) and the cause. Its message
// carries exactly one hint, chosen by kind.
type DialError struct {
	Endpoint Endpoint
	Kind     error
	Err      error
}

func (e *DialError) Error() string {
	if h := e.hint(); h != "" {
		return fmt.Sprintf("dial %s: %v (%s)", e.Endpoint, e.Err, h)
	}
	return fmt.Sprintf("dial %s: %v", e.Endpoint, e.Err)
}

// Unwrap returns the kind and the cause, so errors.Is works with both.
func (e *DialError) Unwrap() []error {
	if e.Kind == nil {
		return []error{e.Err}
	}
	return []error{e.Kind, e.Err}
}

func (e *DialError) hint() string {
	ep := e.Endpoint
	switch e.Kind {
	case ErrNoHost:
		return fmt.Sprintf("write %s://HOST:PORT", ep.Scheme)
	case ErrRefused:
		return fmt.Sprintf("check that a server listens at %s and serves %s:// there", ep.Address(), ep.Scheme)
	case ErrUnreachable:
		return fmt.Sprintf("check the host %s and the routes to it", ep.Host)
	case ErrUnknownHost:
		return fmt.Sprintf("check the host name %q", ep.Host)
	case ErrTimeout:
		return fmt.Sprintf("check the host and port, that the server has a %s listener there, firewalls, or raise the timeout", ep.Scheme)
	case ErrCertificate:
		return "check the CA (--ca): it must have signed the server's certificate, and the URL host must be in the certificate; --insecure skips the check, for tests only"
	case ErrALPN:
		return fmt.Sprintf("the server does not speak ALPN %q: check the port and the scheme", ep.ALPN)
	case ErrTransportNotBuilt:
		return fmt.Sprintf("scheme %s uses transport %s; see the transport package's doc for what is built", ep.Scheme, ep.Transport)
	}
	return ""
}

// newDialError classifies err by type (never by message text).
func newDialError(ep Endpoint, err error) *DialError {
	var de *DialError
	if errors.As(err, &de) {
		return de
	}
	return &DialError{Endpoint: ep, Kind: classify(err), Err: err}
}

func classify(err error) error {
	var (
		dnsErr     *net.DNSError
		unknownCA  x509.UnknownAuthorityError
		hostErr    x509.HostnameError
		invalid    x509.CertificateInvalidError
		verifyErr  *tls.CertificateVerificationError
		alert      tls.AlertError
		quicTE     *quic.TransportError
		idle       *quic.IdleTimeoutError
		hsTimeout  *quic.HandshakeTimeoutError
		netErr     net.Error
		noALPNCode = quic.TransportErrorCode(0x100 + 120) // TLS alert no_application_protocol
	)
	switch {
	case errors.Is(err, ErrNoHost):
		return ErrNoHost
	case errors.Is(err, ErrTransportNotBuilt):
		return ErrTransportNotBuilt
	case errors.As(err, &unknownCA), errors.As(err, &hostErr), errors.As(err, &invalid), errors.As(err, &verifyErr):
		return ErrCertificate
	case errors.As(err, &alert) && alert == 120,
		errors.As(err, &quicTE) && quicTE.Remote && quicTE.ErrorCode == noALPNCode:
		return ErrALPN
	case errors.Is(err, syscall.ECONNREFUSED):
		return ErrRefused
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return ErrUnreachable
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return ErrUnknownHost
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &idle), errors.As(err, &hsTimeout),
		errors.As(err, &netErr) && netErr.Timeout():
		return ErrTimeout
	}
	return nil
}
