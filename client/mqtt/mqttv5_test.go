package mqtt

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iotq/iotq/client/internal/core"
	"github.com/iotq/iotq/internal/certs"
	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/transport"
)

// Interop of iotq's multi-stream QUIC client (transport.QUICClientStreams)
// with the Rust mqtt5 crate's broker and client (mqttv5-cli, pinned in
// scripts/setup.sh), the reference implementation of the MQTT-next mapping
// (docs/mqtt-quic.md). The mqttv5 broker runs as a child process on
// loopback with a certificate generated for the test; it delivers on
// server-opened per-topic flows (its default), which the client reads.
// Without the binary the tests skip, or fail under CI=true.

const mqttv5Version = "0.29.9" // scripts/setup.sh

func mqttv5Bin(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("mqttv5"); err == nil {
		return p
	}
	if home, err := os.UserHomeDir(); err == nil {
		p := filepath.Join(home, ".cargo", "bin", "mqttv5")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	testutil.SkipOrFail(t, "mqttv5 not installed (cargo install mqttv5-cli --version %s --locked; scripts/setup.sh installs it)", mqttv5Version)
	return ""
}

// v5Proc is a running mqttv5 command whose output a test waits for.
type v5Proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	out  []string
	grew chan struct{}
}

func startV5(t *testing.T, bin string, args ...string) *v5Proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "RUST_LOG=warn", "NO_COLOR=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("start mqttv5: %v", err)
	}
	p := &v5Proc{cmd: cmd, done: make(chan struct{}), grew: make(chan struct{}, 1)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.out = append(p.out, sc.Text())
			p.mu.Unlock()
			select {
			case p.grew <- struct{}{}:
			default:
			}
		}
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // our own child, by its handle
		<-p.done
	})
	return p
}

func (p *v5Proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.out, "\n")
}

// waitFor waits until the output contains every string of want.
func (p *v5Proc) waitFor(t *testing.T, what string, want ...string) {
	t.Helper()
	deadline := time.NewTimer(testutil.Scale(20 * time.Second))
	defer deadline.Stop()
	for {
		out, all := p.output(), true
		for _, w := range want {
			all = all && strings.Contains(out, w)
		}
		if all {
			return
		}
		select {
		case <-p.grew:
		case <-p.done:
			if out := p.output(); !strings.Contains(out, want[len(want)-1]) {
				t.Fatalf("%s: mqttv5 exited without printing %q; output:\n%s", what, want, out)
			}
		case <-deadline.C:
			t.Fatalf("%s: no %q (hang); output:\n%s", what, want, p.output())
		}
	}
}

// mqttv5Broker starts `mqttv5 broker` with a QUIC listener on loopback and
// returns its quic:// URL and the CA file; it is ready when our client
// connects.
func mqttv5Broker(t *testing.T, bin string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	files, err := certs.EnsureServerCert(dir, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	tcpPort := testutil.FreePort(t)
	quicPort := freeUDPPort(t)
	startV5(t, bin, "broker", "--host", fmt.Sprintf("127.0.0.1:%d", tcpPort),
		"--quic-host", fmt.Sprintf("127.0.0.1:%d", quicPort),
		"--tls-cert", files.Cert, "--tls-key", files.Key, "--allow-anonymous", "true",
		"--storage-dir", filepath.Join(dir, "storage"))
	url := fmt.Sprintf("quic://127.0.0.1:%d", quicPort)
	deadline := time.Now().Add(testutil.Scale(20 * time.Second))
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := dialRaw(ctx, url, core.Options{ProtocolVersion: 5, CAFile: files.CA, ConnectTimeout: time.Second})
		cancel()
		if err == nil {
			c.Close()
			return url, files.CA
		}
		if time.Now().After(deadline) {
			t.Fatalf("mqttv5 broker not ready at %s: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freeUDPPort(t *testing.T) int {
	t.Helper()
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// TestMqttv5BrokerQUICClientStreams: iotq's client with per-topic and
// per-publish data streams (unidirectional, with flow headers: the broker
// offers MQTT-next) and with QoS 0 datagrams, against the mqtt5 broker in
// both directions: iotq publishes and `mqttv5 sub` receives; `mqttv5 pub`
// publishes and iotq's subscriber receives (on the broker's per-topic
// server flows, acknowledging QoS 1 on them).
func TestMqttv5BrokerQUICClientStreams(t *testing.T) {
	bin := mqttv5Bin(t)
	url, ca := mqttv5Broker(t, bin)
	for i, tc := range []struct {
		name string
		cs   transport.QUICClientStreams
		qos  byte
	}{
		{"per-topic/qos1", transport.QUICClientStreams{Strategy: transport.StrategyPerTopic}, 1},
		{"per-publish/qos1", transport.QUICClientStreams{Strategy: transport.StrategyPerPublish}, 1},
		{"per-topic/datagrams/qos0", transport.QUICClientStreams{Strategy: transport.StrategyPerTopic, Datagrams: true}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := core.Options{ProtocolVersion: 5, CAFile: ca, QUIC: transport.QUICOptions{ClientStreams: tc.cs}}
			common := []string{"--url", url, "--ca-cert", ca, "--non-interactive", "-q", fmt.Sprint(tc.qos)}

			// iotq -> mqttv5 sub
			topic := fmt.Sprintf("iv/%d/out", i)
			sub := startV5(t, bin, append([]string{"sub", "-t", topic, "--count", "3", "-c", fmt.Sprintf("v5sub-%d", i)}, common...)...)
			sub.waitFor(t, "subscribe", "Subscribed")
			pub := dialT(t, url, o)
			for n := range 3 {
				r, err := pub.Publish(context.Background(), topic, []byte(fmt.Sprintf("iotq-%d", n)), core.PublishOptions{QoS: tc.qos})
				if err != nil {
					t.Fatal(err)
				}
				if err := r.Wait(context.Background()); err != nil {
					t.Fatalf("publish %d: %v", n, err)
				}
			}
			sub.waitFor(t, "receive", "iotq-0", "iotq-1", "iotq-2")
			st := pub.ConnectionInfo().QUIC
			switch {
			case tc.cs.Datagrams && st.DatagramsSent != 3:
				t.Errorf("publisher sent %d datagrams, want 3 (negotiated: %v)", st.DatagramsSent, st.Datagrams)
			case !tc.cs.Datagrams && st.DataStreams == 0:
				t.Errorf("publisher opened no data stream")
			}

			// mqttv5 pub -> iotq
			topic = fmt.Sprintf("iv/%d/in", i)
			s := dialT(t, url, o)
			col := newCollector()
			if err := s.Subscribe(context.Background(), topic, core.SubscribeOptions{QoS: tc.qos}, col.handle); err != nil {
				t.Fatal(err)
			}
			for n := range 3 {
				args := append([]string{"pub", "-t", topic, "-m", fmt.Sprintf("v5-%d", n)}, common...)
				if tc.qos == 0 {
					// The mqtt5 client's close abandons unsent stream data:
					// it stays connected until the message has arrived.
					p := startV5(t, bin, append(args, "--keep-alive-after-publish")...)
					col.waitN(t, n+1, testutil.Scale(20*time.Second))
					_ = p.cmd.Process.Signal(os.Interrupt) // our own child
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(20*time.Second))
				out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
				cancel()
				if err != nil {
					t.Fatalf("mqttv5 pub: %v: %s", err, out)
				}
			}
			msgs := col.waitN(t, 3, testutil.Scale(20*time.Second))
			for n := range 3 {
				if string(msgs[n].Payload) != fmt.Sprintf("v5-%d", n) {
					t.Errorf("message %d: %q, want v5-%d", n, msgs[n].Payload, n)
				}
			}
			t.Logf("subscriber: %+v", *s.ConnectionInfo().QUIC)
		})
	}
}
