package transport

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/iotq/iotq/transport/endpoint"
)

// ClientTLSConfig is the one builder of client TLS configurations in iotq
// (TLS over TCP, wss, QUIC; protocol packages use it for their encrypted
// transports too). It starts from a clone of opts.TLSConfig (nil: system
// roots, TLS 1.2 minimum), loads opts.CAFile, applies opts.Insecure and
// opts.ServerName (default: the URL host), offers the ALPN of the scheme
// table row, raises the minimum to TLS 1.3 for QUIC, and installs the
// session cache keyed by scheme and address.
func ClientTLSConfig(ep Endpoint, opts DialOptions) (*tls.Config, error) {
	var cfg *tls.Config
	if opts.TLSConfig != nil {
		cfg = opts.TLSConfig.Clone()
	} else {
		cfg = &tls.Config{}
	}
	if cfg.MinVersion == 0 {
		cfg.MinVersion = tls.VersionTLS12
	}
	if opts.CAFile != "" {
		pem, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read CA file: %w (check the CA path, --ca)", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate (want the server's CA, e.g. the broker's STATE_DIR/tls/ca.pem)", opts.CAFile)
		}
		cfg.RootCAs = pool
	}
	if opts.Insecure {
		cfg.InsecureSkipVerify = true
	}
	if opts.ServerName != "" {
		cfg.ServerName = opts.ServerName
	}
	if cfg.ServerName == "" {
		cfg.ServerName = ep.Host
	}
	if ep.ALPN != "" {
		cfg.NextProtos = []string{ep.ALPN}
	}
	if ep.Transport == endpoint.TransportQUIC && cfg.MinVersion < tls.VersionTLS13 {
		cfg.MinVersion = tls.VersionTLS13
	}
	// crypto/tls itself never resumes a session of an unverified
	// handshake in a verified one.
	prefix := string(ep.Scheme) + "://" + ep.Address() + " "
	if opts.SessionCache != nil {
		cfg.ClientSessionCache = prefixedCache{prefix: prefix, c: opts.SessionCache}
	} else if cfg.ClientSessionCache != nil {
		cfg.ClientSessionCache = prefixedCache{prefix: prefix, c: cfg.ClientSessionCache}
	}
	return cfg, nil
}
