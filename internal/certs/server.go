package certs

import (
	"crypto/tls"
	"fmt"
)

// ServerCert names the certificate of a server (broker, gateway) in its
// configuration.
type ServerCert struct {
	// Cert and Key are PEM files. Both empty: a CA and a server certificate
	// are generated in STATE_DIR/tls on first start and reused afterwards.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
	// Hosts are extra DNS names or IP addresses for the generated server
	// certificate, besides the local host names and addresses.
	Hosts []string `yaml:"hosts"`
}

// Server returns the server's TLS configuration. With Cert and Key it loads
// them, and keeps the session ticket keys in stateDir when one is given, so
// that resumption and 0-RTT survive a restart. Otherwise it generates (or
// reuses) a certificate in stateDir covering the local host, Hosts and
// listenHosts; caFile is then the CA clients must trust ("" otherwise).
func (c ServerCert) Server(stateDir string, listenHosts []string) (cfg *tls.Config, caFile string, err error) {
	if c.Cert != "" {
		cfg, err := ServerTLSConfig(c.Cert, c.Key)
		if err != nil {
			return nil, "", err
		}
		if stateDir != "" {
			keys, err := LoadOrCreateTicketKeys(stateDir)
			if err != nil {
				return nil, "", err
			}
			cfg.SetSessionTicketKeys(keys)
		}
		return cfg, "", nil
	}
	hosts := append(append(LocalHosts(), c.Hosts...), listenHosts...)
	cfg, files, err := ServerConfig(stateDir, hosts)
	if err != nil {
		return nil, "", fmt.Errorf("TLS certificate in %s: %w", stateDir, err)
	}
	return cfg, files.CA, nil
}
