package testutil

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/internal/certs"
	"github.com/iotq/iotq/internal/protonbroker"
)

// Proton is a small AMQP 1.0 broker on Qpid Proton (internal/protonbroker)
// started by a test.
type Proton struct {
	Port    int    // AMQP over TCP on 127.0.0.1
	TLSPort int    // AMQP over TLS on 127.0.0.1 (0 unless asked for)
	CAFile  string // the CA of the TLS listener's certificate
	log     *SyncBuffer
}

// URL is the amqp:// URL of the plain listener.
func (p *Proton) URL() string { return fmt.Sprintf("amqp://127.0.0.1:%d", p.Port) }

// TLSURL is the amqps:// URL of the TLS listener.
func (p *Proton) TLSURL() string { return fmt.Sprintf("amqps://127.0.0.1:%d", p.TLSPort) }

// Log returns what the broker wrote to standard error so far (with
// Options.Verbose: links and connection errors such as
// amqp:session:window-violation).
func (p *Proton) Log() string { return p.log.String() }

// StartProton starts the Proton broker on free loopback ports (o.Host and
// the ports are set here; o.TLS adds a TLS listener whose certificate is
// generated here) and stops it, by its PID, in t.Cleanup. Without
// python3-qpid-proton it skips, or fails under CI=true.
func StartProton(t testing.TB, o protonbroker.Options) *Proton {
	t.Helper()
	o.Host, o.Port, o.TLSPort, o.StopOnEOF, o.Verbose = "127.0.0.1", 0, 0, true, true
	p := &Proton{log: &SyncBuffer{}}
	if o.TLS {
		files, err := certs.EnsureServerCert(t.TempDir(), []string{"127.0.0.1", "localhost"})
		if err != nil {
			t.Fatal(err)
		}
		o.CertFile, o.KeyFile, p.CAFile = files.Cert, files.Key, files.CA
	}
	cmd, err := protonbroker.Command(o)
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
	cmd.Stderr = p.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the proton broker: %v", err)
	}
	ready := make(chan string, 1)
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready") {
				ready <- sc.Text()
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
		if t.Failed() {
			t.Logf("proton broker log:\n%s", p.log.String())
		}
	})
	select {
	case line := <-ready:
		port, tlsPort, ok := protonbroker.ParseReady(line)
		if !ok || o.TLS != (tlsPort != 0) {
			t.Fatalf("proton broker: ready line %q", line)
		}
		p.Port, p.TLSPort = port, tlsPort
	case <-exited:
		t.Fatalf("proton broker exited before it was ready: %s", p.log.String())
	case <-time.After(Scale(30 * time.Second)):
		t.Fatalf("proton broker not ready after 30s: %s", p.log.String())
	}
	return p
}
