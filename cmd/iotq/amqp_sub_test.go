package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iotq/iotq/internal/protonbroker"
	"github.com/iotq/iotq/internal/testutil"
)

// TestAMQPSubFeatures: iotq sub and pub against both AMQP brokers. On
// ActiveMQ Artemis, --persistent makes the subscription durable: a message
// published between two runs of `iotq sub --persistent --client-id ID`
// arrives in the second (before: --persistent was ignored and the message
// lost); `iotq sub -t 'iotq.cli.#'` gets iotq.cli.a.b and prints that
// address (before: refused, AMQP addresses had no wildcards). On the Qpid
// Proton broker --persistent fails with a message (it keeps no
// subscriptions). On both, --property and --message-id are printed by sub
// as "TOPIC [id=ID KEY=VALUE] PAYLOAD" (before: no such flags); on MQTT
// they are refused.
func TestAMQPSubFeatures(t *testing.T) {
	for _, name := range []string{"artemis", "proton"} {
		t.Run(name, func(t *testing.T) {
			var url string
			if name == "artemis" {
				url = testutil.StartArtemis(t, false).URL()
			} else {
				url = testutil.StartProton(t, protonbroker.Options{}).URL()
			}
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(90*time.Second))
			defer cancel()
			dir := t.TempDir()
			pub := func(topic, msg string, extra ...string) {
				t.Helper()
				args := append([]string{"pub", "--url", url, "-t", topic, "-m", msg, "-q", "1"}, extra...)
				if code, out, errs := runCLI(ctx, args...); code != 0 {
					t.Fatalf("%v: exit %d\n%s%s", args, code, out, errs)
				}
			}

			// properties and message id
			ready := filepath.Join(dir, "props.ready")
			sub := startCLI(ctx, "sub", "--url", url, "-t", "iotq.cli.props", "-n", "1", "--timeout", "60s", "--ready-file", ready)
			waitFile(t, ready)
			pub("iotq.cli.props", "hi", "--property", "unit=C", "--property", "room=k 1", "--message-id", "m-1")
			sub.wait(t)
			if want := "iotq.cli.props [id=m-1 room=\"k 1\" unit=C] hi\n"; sub.code != 0 || sub.out.String() != want {
				t.Fatalf("sub: exit %d, output %q, want %q\n%s", sub.code, sub.out.String(), want, sub.errb.String())
			}

			// durable subscription
			durable := []string{"sub", "--url", url, "--persistent", "--client-id", "iotq-cli-durable", "-t", "iotq.cli.durable",
				"-n", "1", "--timeout", "60s", "-q", "1"}
			if name == "proton" {
				code, _, errs := runCLI(ctx, durable...)
				if code != 1 || !strings.Contains(errs, "does not keep this subscription") {
					t.Fatalf("sub --persistent on a broker without durable subscriptions: exit %d: %s", code, errs)
				}
				return
			}
			ready = filepath.Join(dir, "durable.ready")
			sub = startCLI(ctx, append(durable, "--ready-file", ready)...)
			waitFile(t, ready)
			pub("iotq.cli.durable", "first")
			sub.wait(t)
			if sub.code != 0 || sub.out.String() != "iotq.cli.durable first\n" {
				t.Fatalf("first durable run: exit %d %q %s", sub.code, sub.out.String(), sub.errb.String())
			}
			pub("iotq.cli.durable", "while away")
			code, out, errs := runCLI(ctx, durable...)
			if code != 0 || out != "iotq.cli.durable while away\n" {
				t.Fatalf("second durable run: exit %d %q %s", code, out, errs)
			}

			// Artemis's wildcards
			ready = filepath.Join(dir, "wild.ready")
			sub = startCLI(ctx, "sub", "--url", url, "-t", "iotq.cli.#", "-n", "2", "--timeout", "60s", "--ready-file", ready)
			waitFile(t, ready)
			pub("iotq.cli.a.b", "x")
			pub("iotq.cli.c", "y")
			sub.wait(t)
			if want := "iotq.cli.a.b x\niotq.cli.c y\n"; sub.code != 0 || sub.out.String() != want {
				t.Fatalf("sub -t iotq.cli.#: exit %d %q, want %q: %s", sub.code, sub.out.String(), want, sub.errb.String())
			}
		})
	}
	code, _, errs := runCLI(context.Background(), "pub", "--url", "mqtt://127.0.0.1:1", "-t", "a", "-m", "x", "--property", "k=v")
	if code != 2 || !strings.Contains(errs, "AMQP only") {
		t.Fatalf("pub --property over MQTT: exit %d: %s", code, errs)
	}
}

// cutRelay is a TCP relay on loopback whose connections can be cut and
// which refuses new ones (accepts and closes them) while down.
type cutRelay struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newCutRelay(t *testing.T, target string) *cutRelay {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &cutRelay{ln: ln, target: target}
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(func() {
		ln.Close()
		r.cut(false)
		r.wg.Wait()
	})
	return r
}

func (r *cutRelay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		down := r.down
		r.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		u, err := net.Dial("tcp", r.target)
		if err != nil {
			c.Close()
			continue
		}
		r.mu.Lock()
		r.conns = append(r.conns, c, u)
		r.mu.Unlock()
		for _, p := range [][2]net.Conn{{c, u}, {u, c}} {
			r.wg.Add(1)
			go func(dst, src net.Conn) {
				defer r.wg.Done()
				_, _ = io.Copy(dst, src)
				dst.Close()
				src.Close()
			}(p[0], p[1])
		}
	}
}

// cut closes every relayed connection; down refuses new ones until the
// next cut(false).
func (r *cutRelay) cut(down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = down
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
}

// TestAMQPSubReconnect: `iotq sub` over AMQP reconnects when the
// connection is lost (a relay cuts it and refuses connections for a
// while): one line per attempt on standard error, the subscription made
// again, and a message published after the reconnection arrives; on
// ActiveMQ Artemis with --persistent also the one published while the
// subscriber was cut off. Before, sub exited with "connection lost".
// --reconnect=false keeps the old behaviour.
func TestAMQPSubReconnect(t *testing.T) {
	for _, name := range []string{"proton", "artemis"} {
		t.Run(name, func(t *testing.T) {
			var url string
			if name == "artemis" {
				url = testutil.StartArtemis(t, false).URL()
			} else {
				url = testutil.StartProton(t, protonbroker.Options{}).URL()
			}
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(90*time.Second))
			defer cancel()
			relay := newCutRelay(t, strings.TrimPrefix(url, "amqp://"))
			rurl := "amqp://" + relay.ln.Addr().String()
			dir := t.TempDir()
			ready := filepath.Join(dir, "sub.ready")
			args := []string{"sub", "--url", rurl, "-t", "iotq.cli.rec", "-n", "2", "--timeout", "60s", "-q", "1",
				"--reconnect-max", "1s", "--ready-file", ready}
			if name == "artemis" {
				args = append(args, "--persistent", "--client-id", "iotq-cli-rec")
			}
			sub := startCLI(ctx, args...)
			waitFile(t, ready)
			relay.cut(true)
			testutil.Eventually(t, testutil.Scale(20*time.Second), func() error {
				if n := strings.Count(sub.errb.String(), "reconnecting in"); n < 2 { // lost, then at least one failed attempt
					return fmt.Errorf("%d reconnection attempts logged: %s", n, sub.errb.String())
				}
				return nil
			})
			pubArgs := func(msg string) []string {
				return []string{"pub", "--url", url, "-t", "iotq.cli.rec", "-m", msg, "-q", "1"}
			}
			want := "iotq.cli.rec after\n"
			if name == "artemis" {
				if code, out, errs := runCLI(ctx, pubArgs("away")...); code != 0 {
					t.Fatalf("pub: %d %s%s", code, out, errs)
				}
				want = "iotq.cli.rec away\n" + want
			}
			relay.cut(false)
			testutil.Eventually(t, testutil.Scale(20*time.Second), func() error {
				if !strings.Contains(sub.errb.String(), "reconnected") {
					return errors.New("not reconnected yet")
				}
				return nil
			})
			if code, out, errs := runCLI(ctx, pubArgs("after")...); code != 0 {
				t.Fatalf("pub: %d %s%s", code, out, errs)
			}
			if name == "proton" { // -n 2: one more
				if code, out, errs := runCLI(ctx, pubArgs("after")...); code != 0 {
					t.Fatalf("pub: %d %s%s", code, out, errs)
				}
				want += want
			}
			sub.wait(t)
			if sub.code != 0 || sub.out.String() != want {
				t.Fatalf("sub: exit %d, output %q, want %q\n%s", sub.code, sub.out.String(), want, sub.errb.String())
			}
			t.Log(sub.errb.String())

			// --reconnect=false: the old behaviour
			ready = filepath.Join(dir, "off.ready")
			off := startCLI(ctx, "sub", "--url", rurl, "-t", "iotq.cli.off", "--reconnect=false", "--ready-file", ready)
			waitFile(t, ready)
			relay.cut(false)
			off.wait(t)
			if off.code != 1 || !strings.Contains(off.errb.String(), "connection lost") || strings.Contains(off.errb.String(), "reconnecting") {
				t.Fatalf("--reconnect=false: exit %d: %s", off.code, off.errb.String())
			}
		})
	}
}
