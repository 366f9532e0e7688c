package mqtt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/client/internal/core"
	"github.com/iotq/iotq/internal/certs"
	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/transport"
)

// TestMosquittoTLSAndWebSocket: our client against Mosquitto over TLS
// (certificate generated here), WebSocket and plain TCP, MQTT 3.1.1 and 5;
// a second TLS connection with the persisted ticket file resumes; a client
// without the CA fails with a hint about --ca.
func TestMosquittoTLSAndWebSocket(t *testing.T) {
	files, err := certs.EnsureServerCert(t.TempDir(), []string{"127.0.0.1", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	tlsPort, wsPort := testutil.FreePort(t), testutil.FreePort(t)
	m := testutil.StartMosquitto(t, fmt.Sprintf("listener %d 127.0.0.1\ncertfile %s\nkeyfile %s\ntls_version tlsv1.3\nlistener %d 127.0.0.1\nprotocol websockets\n",
		tlsPort, files.Cert, files.Key, wsPort), tlsPort, wsPort)
	urls := map[string]string{
		"mqtt":  m.URL(),
		"mqtts": fmt.Sprintf("mqtts://127.0.0.1:%d", tlsPort),
		"ws":    fmt.Sprintf("ws://127.0.0.1:%d/mqtt", wsPort),
	}
	ctx := context.Background()
	for _, scheme := range []string{"mqtt", "mqtts", "ws"} {
		for _, p := range protocols {
			t.Run(scheme+"/"+p.name, func(t *testing.T) {
				o := core.Options{ProtocolVersion: p.v, CAFile: files.CA}
				topic := "interop/" + scheme + "/" + p.name
				sub := dialT(t, urls[scheme], o)
				col := newCollector()
				if err := sub.Subscribe(ctx, topic, core.SubscribeOptions{QoS: 2}, col.handle); err != nil {
					t.Fatal(err)
				}
				pub := dialT(t, urls[scheme], o)
				for q := byte(0); q <= 2; q++ {
					r, err := pub.Publish(ctx, topic, []byte{q}, core.PublishOptions{QoS: q})
					if err != nil {
						t.Fatal(err)
					}
					if err := r.Wait(ctx); err != nil {
						t.Fatalf("qos %d: %v", q, err)
					}
				}
				msgs := col.waitN(t, 3, 5*time.Second)
				for i, msg := range msgs {
					if msg.QoS != byte(i) || msg.Payload[0] != byte(i) {
						t.Fatalf("message %d: qos %d payload %v", i, msg.QoS, msg.Payload)
					}
				}
				if info := pub.ConnectionInfo(); info.Transport != scheme {
					t.Fatalf("transport %q, want %q", info.Transport, scheme)
				}
			})
		}
	}

	t.Run("mqtts resumes with --session-cache", func(t *testing.T) {
		cache := filepath.Join(t.TempDir(), "tickets")
		o := core.Options{CAFile: files.CA, SessionCacheFile: cache}
		for i, wantResumed := range []bool{false, true} {
			c := dialT(t, urls["mqtts"], o)
			// A round trip after CONNACK, so the ticket has surely arrived.
			r, err := c.Publish(ctx, "resume", []byte("x"), core.PublishOptions{QoS: 1})
			if err != nil || r.Wait(ctx) != nil {
				t.Fatalf("publish: %v %v", err, r.Err())
			}
			if got := c.ConnectionInfo().TLSResumed; got != wantResumed {
				t.Fatalf("connection %d: TLSResumed %v, want %v", i+1, got, wantResumed)
			}
			c.Close() // writes the ticket file
			if fi, err := os.Stat(cache); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("ticket file: %v %v", fi, err)
			}
		}
	})

	t.Run("mqtts without the CA", func(t *testing.T) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := dialRaw(cctx, urls["mqtts"], core.Options{})
		if !errors.Is(err, transport.ErrCertificate) || !strings.Contains(err.Error(), "check the CA (--ca)") {
			t.Fatalf("got %v, want a hint about --ca", err)
		}
	})
}

// TestMosquittoAuthRefused: a wrong password is refused with a hint about
// --username/--password, for both MQTT versions; the right one connects.
func TestMosquittoAuthRefused(t *testing.T) {
	pw := testutil.RequireTool(t, "mosquitto_passwd", "apt-get install mosquitto")
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "passwd")
	if out, err := exec.Command(pw, "-b", "-c", pwFile, "alice", "secret").CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_passwd: %v %s", err, out)
	}
	m := testutil.StartMosquitto(t, fmt.Sprintf("allow_anonymous false\npassword_file %s\n", pwFile))
	ctx := context.Background()
	for _, p := range protocols {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := dialRaw(cctx, m.URL(), core.Options{ProtocolVersion: p.v, Username: "alice", Password: "wrong"})
		cancel()
		if err == nil || !strings.Contains(err.Error(), "check --username/--password") {
			t.Fatalf("%s: got %v, want a hint about --username/--password", p.name, err)
		}
		c := dialT(t, m.URL(), core.Options{ProtocolVersion: p.v, Username: "alice", Password: "secret"})
		c.Close()
	}
}

// TestPythonPahoPeer: an independent MQTT implementation (Python
// paho-mqtt 2.x) exchanges messages with our client through Mosquitto, both
// MQTT versions. Skipped when python3 or paho-mqtt is missing, except under
// CI=true, where scripts/setup.sh installs paho-mqtt==2.1.0 and a missing
// peer fails the test.
func TestPythonPahoPeer(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err == nil {
		err = exec.Command(py, "-c", "import paho.mqtt.client").Run()
	}
	if err != nil {
		testutil.SkipOrFail(t, "python3 with paho-mqtt not available: %v (pip install paho-mqtt==2.1.0)", err)
	}
	m := testutil.StartMosquitto(t, "")
	ctx := context.Background()
	port := fmt.Sprint(m.Port)
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			// Python publishes, we subscribe.
			sub := dialT(t, m.URL(), core.Options{ProtocolVersion: p.v})
			col := newCollector()
			if err := sub.Subscribe(ctx, "py/in", core.SubscribeOptions{QoS: 1}, col.handle); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(py, "testdata/paho_peer.py", "127.0.0.1", port, fmt.Sprint(p.v), "pub").CombinedOutput(); err != nil {
				t.Fatalf("python pub: %v %s", err, out)
			}
			for i, msg := range col.waitN(t, 5, 10*time.Second) {
				if string(msg.Payload) != fmt.Sprintf("py-%d", i) || msg.QoS != 1 {
					t.Fatalf("message %d: %q qos %d", i, msg.Payload, msg.QoS)
				}
			}

			// We publish QoS 0, 1, 2; Python subscribes.
			cmd := exec.Command(py, "testdata/paho_peer.py", "127.0.0.1", port, fmt.Sprint(p.v), "sub")
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			lines := make(chan string, 10)
			go func() {
				defer close(lines)
				buf := make([]byte, 4096)
				var acc string
				for {
					n, err := stdout.Read(buf)
					acc += string(buf[:n])
					for {
						i := strings.IndexByte(acc, '\n')
						if i < 0 {
							break
						}
						lines <- acc[:i]
						acc = acc[i+1:]
					}
					if err != nil {
						return
					}
				}
			}()
			next := func() string {
				select {
				case l := <-lines:
					return l
				case <-time.After(10 * time.Second):
					t.Fatal("python subscriber silent")
					return ""
				}
			}
			if l := next(); l != "ready" {
				t.Fatalf("python said %q", l)
			}
			pub := dialT(t, m.URL(), core.Options{ProtocolVersion: p.v})
			for q := byte(0); q <= 2; q++ {
				r, err := pub.Publish(ctx, "py/out", []byte(fmt.Sprintf("go-%d", q)), core.PublishOptions{QoS: q})
				if err != nil || r.Wait(ctx) != nil {
					t.Fatalf("publish qos %d: %v %v", q, err, r.Err())
				}
			}
			for q := 0; q <= 2; q++ {
				if l := next(); l != fmt.Sprintf("go-%d", q) {
					t.Fatalf("python got %q, want go-%d", l, q)
				}
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("python sub: %v", err)
			}
		})
	}
}
