package artemis

import (
	"fmt"
	"os/exec"
)

// ReadyLine is what the launcher prints on standard output once every
// acceptor listens.
const ReadyLine = "ready"

// KeyStore writes a PEM certificate and key into the PKCS12 key store the
// TLS acceptor reads, with openssl (scripts/setup.sh installs it).
func KeyStore(certFile, keyFile, out, password string) error {
	b, err := exec.Command("openssl", "pkcs12", "-export", "-in", certFile, "-inkey", keyFile,
		"-out", out, "-passout", "pass:"+password, "-name", "broker").CombinedOutput()
	if err != nil {
		return fmt.Errorf("artemis: key store with openssl pkcs12 (scripts/setup.sh installs openssl): %w: %s", err, b)
	}
	return nil
}
