package artemis

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// Version is the Artemis version scripts/artemis/pom.xml pins.
const Version = "2.55.0"

// ErrNotInstalled: java or the launcher is missing.
var ErrNotInstalled = errors.New("ActiveMQ Artemis not installed")

// Dir is where scripts/setup.sh puts the jars (lib/) and the launcher
// (classes/).
func Dir() string {
	base := os.Getenv("IOTQ_CACHE")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil || home == "" {
			home = os.TempDir()
		}
		base = filepath.Join(home, ".cache", "iotq")
	}
	return filepath.Join(base, "artemis-"+Version)
}

// Options of one broker process. Zero values: 127.0.0.1, port 5672, no
// TLS acceptor, 256 MB of heap.
type Options struct {
	Host string // address to bind (loopback or the namespace's address)
	Port int    // AMQP over TCP
	// TLSPort, if not 0, adds an AMQP-over-TLS acceptor with the PKCS12
	// KeyStore (password KeyStorePassword).
	TLSPort          int
	KeyStore         string
	KeyStorePassword string
	// StopOnEOF stops the broker when its standard input closes.
	StopOnEOF bool
	// MaxHeapMB bounds the JVM heap. Default 256.
	MaxHeapMB int
}

// Command returns the command that runs the broker (not started). It fails
// with ErrNotInstalled, saying what to run, when the setup is missing.
func Command(o Options) (*exec.Cmd, error) {
	dir := Dir()
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("%w: no java (%v); run scripts/setup.sh", ErrNotInstalled, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "classes", "Broker.class")); err != nil {
		return nil, fmt.Errorf("%w in %s (%v); run scripts/setup.sh", ErrNotInstalled, dir, err)
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Port == 0 {
		o.Port = 5672
	}
	if o.MaxHeapMB == 0 {
		o.MaxHeapMB = 256
	}
	args := []string{"-Xms32m", "-Xmx" + strconv.Itoa(o.MaxHeapMB) + "m", "-XX:+UseSerialGC",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-cp", filepath.Join(dir, "classes") + string(os.PathListSeparator) + filepath.Join(dir, "lib", "*"),
		"Broker", "--host", o.Host, "--port", strconv.Itoa(o.Port)}
	if o.TLSPort != 0 {
		if o.KeyStore == "" {
			return nil, errors.New("artemis: a TLS acceptor needs a PKCS12 key store")
		}
		args = append(args, "--tls-port", strconv.Itoa(o.TLSPort), "--keystore", o.KeyStore, "--keystore-password", o.KeyStorePassword)
	}
	if o.StopOnEOF {
		args = append(args, "--stop-on-eof", "true")
	}
	return exec.Command(java, args...), nil
}
