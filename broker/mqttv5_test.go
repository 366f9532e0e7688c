package broker_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/internal/testutil"
)

// Interop with the Rust mqtt5 crate's CLI (mqttv5-cli, pinned in
// scripts/setup.sh), the reference client of the MQTT-next mapping
// (docs/mqtt-quic.md): its QUIC stream strategies, flow headers and
// datagrams against the iotq broker. Without the binary the tests skip,
// or fail under CI=true.

// mqttv5Version is the mqttv5-cli release scripts/setup.sh installs.
const mqttv5Version = "0.29.9"

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

// mqttv5Proc is a running mqttv5 command whose output lines a test waits
// for.
type mqttv5Proc struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan error
	mu    sync.Mutex
	out   []string
}

func startMqttv5(t *testing.T, bin string, args ...string) *mqttv5Proc {
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
	p := &mqttv5Proc{cmd: cmd, lines: make(chan string, 256), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.out = append(p.out, sc.Text())
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		p.done <- cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // our own child, by its handle
		<-p.done
	})
	return p
}

// stop interrupts the command (it disconnects cleanly on SIGINT) and
// waits for it, killing it after 5 s.
func (p *mqttv5Proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(os.Interrupt) // our own child
	select {
	case <-p.done:
	case <-time.After(testutil.Scale(5 * time.Second)):
		_ = p.cmd.Process.Kill()
		t.Logf("mqttv5 did not exit on SIGINT; killed. output:\n%s", p.output())
	}
}

func (p *mqttv5Proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.out, "\n")
}

// waitLine waits for an output line containing s.
func (p *mqttv5Proc) waitLine(t *testing.T, s string, timeout time.Duration, what string) {
	t.Helper()
	deadline := time.NewTimer(testutil.Scale(timeout))
	defer deadline.Stop()
	for {
		select {
		case l := <-p.lines:
			if strings.Contains(l, s) {
				return
			}
		case err := <-p.done:
			p.mu.Lock()
			for _, l := range p.out {
				if strings.Contains(l, s) {
					p.mu.Unlock()
					return
				}
			}
			p.mu.Unlock()
			t.Fatalf("%s: mqttv5 exited (%v) without printing %q; output:\n%s", what, err, s, p.output())
		case <-deadline.C:
			t.Fatalf("%s: no %q after %v (hang); output:\n%s", what, s, timeout, p.output())
		}
	}
}

// runMqttv5 runs a command that must exit 0 within timeout.
func runMqttv5(t *testing.T, bin string, timeout time.Duration, what string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(timeout))
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "RUST_LOG=warn", "NO_COLOR=1")
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s: mqttv5 still running after %v (hang); output:\n%s", what, timeout, out)
	}
	if err != nil {
		t.Fatalf("%s: mqttv5 %v; output:\n%s", what, err, out)
	}
	return string(out)
}

type mqttv5Case struct {
	name     string
	strategy string // --quic-stream-strategy; "" for the client's default
	flow     bool   // --quic-flow-headers
	dgram    bool   // --quic-datagrams
	qos      int
}

func (c mqttv5Case) quicArgs() []string {
	var a []string
	if c.strategy != "" {
		a = append(a, "--quic-stream-strategy", c.strategy)
	}
	if c.flow {
		a = append(a, "--quic-flow-headers")
	}
	if c.dgram {
		a = append(a, "--quic-datagrams")
	}
	return a
}

// pubSub subscribes with the case's client settings, publishes n messages
// one command each, and waits for the subscriber to receive them all.
func pubSub(t *testing.T, bin, url, ca, topic string, c mqttv5Case, n int) {
	t.Helper()
	common := []string{"--url", url, "--ca-cert", ca, "--non-interactive"}
	subArgs := append([]string{"sub", "-t", topic, "-q", fmt.Sprint(c.qos), "--count", fmt.Sprint(n), "-c", "sub-" + strings.ReplaceAll(topic, "/", "-")}, common...)
	sub := startMqttv5(t, bin, append(subArgs, c.quicArgs()...)...)
	sub.waitLine(t, "Subscribed", 15*time.Second, "subscribe")
	for i := range n {
		msg := fmt.Sprintf("m%d", i)
		pubArgs := append([]string{"pub", "-t", topic, "-q", fmt.Sprint(c.qos), "-m", msg}, common...)
		pubArgs = append(pubArgs, c.quicArgs()...)
		if c.qos > 0 {
			runMqttv5(t, bin, 15*time.Second, fmt.Sprintf("publish %d", i), pubArgs...)
			continue
		}
		// QoS 0: the client closes its QUIC connection right after the
		// PUBLISH, and closing abandons stream data not sent yet, so the
		// publisher stays connected until the message has arrived.
		pub := startMqttv5(t, bin, append(pubArgs, "--keep-alive-after-publish")...)
		sub.waitLine(t, msg, 15*time.Second, fmt.Sprintf("QoS 0 message %d", i))
		pub.stop(t)
	}
	sub.waitLine(t, fmt.Sprintf("Received %d messages", n), 15*time.Second, "receive")
	for i := range n {
		if !strings.Contains(sub.output(), fmt.Sprintf("m%d", i)) {
			t.Fatalf("message m%d missing; subscriber output:\n%s", i, sub.output())
		}
	}
}

// TestMqttv5QUICStreamStrategies: the mqtt5 client publishes and
// subscribes through the broker over QUIC in each of its stream strategies,
// with and without flow headers, at QoS 0 and 1 (before multi-stream
// support, per-topic and per-publish hung: the broker never read the
// client's data streams).
func TestMqttv5QUICStreamStrategies(t *testing.T) {
	bin := mqttv5Bin(t)
	srv, u := quicBroker(t, broker.Options{})
	var cases []mqttv5Case
	for _, s := range []string{"control-only", "per-publish", "per-topic"} {
		for _, flow := range []bool{false, true} {
			for _, qos := range []int{0, 1} {
				name := fmt.Sprintf("%s/qos%d", s, qos)
				if flow {
					name = fmt.Sprintf("%s/flow-headers/qos%d", s, qos)
				}
				cases = append(cases, mqttv5Case{name: name, strategy: s, flow: flow, qos: qos})
			}
		}
	}
	cases = append(cases, mqttv5Case{name: "per-topic/flow-headers/qos2", strategy: "per-topic", flow: true, qos: 2})
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pubSub(t, bin, u, srv.CAFile(), fmt.Sprintf("v5s/%d", i), c, 3)
		})
	}
}

// TestMqttv5QUICDatagrams: QoS 0 PUBLISH packets in QUIC datagrams reach
// the subscriber and are counted as delivered.
func TestMqttv5QUICDatagrams(t *testing.T) {
	bin := mqttv5Bin(t)
	srv, u := quicBroker(t, broker.Options{Metrics: "127.0.0.1:0"})
	key := `iotq_broker_quic_datagrams_received_total{result="delivered"}`
	before := metricValue(scrape(t, srv), key)
	pubSub(t, bin, u, srv.CAFile(), "v5d/t", mqttv5Case{strategy: "control-only", dgram: true, qos: 0}, 3)
	if got := metricValue(scrape(t, srv), key); got-max(before, 0) < 3 {
		t.Fatalf("%s = %v (before %v): the QoS 0 messages did not come as datagrams", key, got, before)
	}
}

// TestMqttv5QUICServerDelivery: with quic.delivery per-topic or
// per-publish the broker delivers on streams it opens; the mqtt5 client
// reads them (and acknowledges QoS 1 on the same stream).
func TestMqttv5QUICServerDelivery(t *testing.T) {
	bin := mqttv5Bin(t)
	for _, d := range []string{"per-topic", "per-publish"} {
		for _, flow := range []bool{false, true} {
			name := d
			if flow {
				name += "/flow-headers"
			}
			t.Run(name, func(t *testing.T) {
				srv, u := quicBroker(t, broker.Options{Metrics: "127.0.0.1:0", QUIC: broker.QUICOptions{Delivery: d}})
				for qos := range 2 {
					pubSub(t, bin, u, srv.CAFile(), fmt.Sprintf("v5sd/%d", qos), mqttv5Case{qos: qos, flow: flow}, 3)
				}
				if got := metricValue(scrape(t, srv), "iotq_broker_quic_server_streams_total"); got < 1 {
					t.Fatalf("iotq_broker_quic_server_streams_total = %v: nothing was delivered on a broker-opened stream", got)
				}
			})
		}
	}
}
