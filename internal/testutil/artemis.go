package testutil

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/iotq/iotq/internal/artemis"
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

// StartArtemis starts Artemis on free loopback ports (with withTLS, also an
// amqps acceptor whose certificate is generated here) and stops it, by its
// PID, in t.Cleanup. Without the setup (java, the jars) it skips, or fails
// under CI=true.
func StartArtemis(t testing.TB, withTLS bool) *Artemis {
	t.Helper()
	o := artemis.Options{Host: "127.0.0.1", Port: FreePort(t), StopOnEOF: true}
	a := &Artemis{Port: o.Port}
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
		a.TLSPort, a.CAFile = FreePort(t), files.CA
		o.TLSPort, o.KeyStore, o.KeyStorePassword = a.TLSPort, ks, "iotq-test"
	}
	cmd, err := artemis.Command(o)
	if err != nil {
		SkipOrFail(t, "%v", err)
	}
	stdin, err := cmd.StdinPipe() // closing it stops the broker, too
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &SyncBuffer{}
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
