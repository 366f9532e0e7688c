package testutil

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/iotq/iotq/internal/certs"
)

// Artemis is an embedded ActiveMQ Artemis (AMQP 1.0) started by a test.
type Artemis struct {
	Port    int    // AMQP over TCP on 127.0.0.1
	TLSPort int    // AMQP over TLS on 127.0.0.1 (0 unless asked for)
	CAFile  string // the CA of the TLS acceptor's certificate
}

// URL is the amqp:// URL of the plain acceptor.
func (a *Artemis) URL() string { return fmt.Sprintf("amqp://127.0.0.1:%d", a.Port) }

// TLSURL is the amqps:// URL of the TLS acceptor.
func (a *Artemis) TLSURL() string { return fmt.Sprintf("amqps://127.0.0.1:%d", a.TLSPort) }

// ArtemisDir is where scripts/setup.sh puts the Artemis jars (lib/) and
// our launcher (classes/Broker.class): $IOTQ_CACHE/artemis-2.55.0, by
// default ~/.cache/iotq/artemis-2.55.0.
func ArtemisDir() string {
	base := os.Getenv("IOTQ_CACHE")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache", "iotq")
	}
	return filepath.Join(base, "artemis-2.55.0")
}

// StartArtemis starts Artemis on free loopback ports (with withTLS, also an
// amqps acceptor whose certificate is generated here) and stops it, by its
// PID, in t.Cleanup. Without the setup (java, the jars) it skips, or fails
// under CI=true.
func StartArtemis(t testing.TB, withTLS bool) *Artemis {
	t.Helper()
	dir := ArtemisDir()
	java, err := exec.LookPath("java")
	if _, serr := os.Stat(filepath.Join(dir, "classes", "Broker.class")); err != nil || serr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("ActiveMQ Artemis not set up in %s (run scripts/setup.sh): java %v, launcher %v", dir, err, serr)
		}
		t.Skipf("ActiveMQ Artemis not set up in %s; run scripts/setup.sh", dir)
	}
	a := &Artemis{Port: freeTCPPort(t)}
	args := []string{"-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-cp", filepath.Join(dir, "classes") + string(os.PathListSeparator) + filepath.Join(dir, "lib", "*"),
		"Broker", "--host", "127.0.0.1", "--port", fmt.Sprint(a.Port), "--stop-on-eof", "true"}
	if withTLS {
		tmp := t.TempDir()
		files, err := certs.EnsureServerCert(tmp, []string{"127.0.0.1", "localhost"})
		if err != nil {
			t.Fatal(err)
		}
		ks := filepath.Join(tmp, "broker.p12")
		out, err := exec.Command("openssl", "pkcs12", "-export", "-in", files.Cert, "-inkey", files.Key,
			"-out", ks, "-passout", "pass:iotq-test", "-name", "broker").CombinedOutput()
		if err != nil {
			t.Fatalf("openssl pkcs12 (scripts/setup.sh installs openssl): %v: %s", err, out)
		}
		a.TLSPort, a.CAFile = freeTCPPort(t), files.CA
		args = append(args, "--tls-port", fmt.Sprint(a.TLSPort), "--keystore", ks, "--keystore-password", "iotq-test")
	}
	cmd := exec.Command(java, args...)
	stdin, err := cmd.StdinPipe() // closing it stops the broker, too
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start artemis: %v", err)
	}
	ready := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(ready)
				break
			}
		}
		for sc.Scan() { // drain until exit
		}
	}()
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	select {
	case <-ready:
	case <-exited:
		t.Fatalf("artemis exited before it was ready: %s", stderr.String())
	case <-time.After(Scale(60 * time.Second)):
		t.Fatalf("artemis not ready after 60s: %s", stderr.String())
	}
	return a
}

// freeTCPPort returns a loopback TCP port that was free a moment ago.
func freeTCPPort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// lockedBuffer collects a child's output; safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}
