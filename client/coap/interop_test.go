package coap_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/internal/testutil"
)

func needTool(t testing.TB, name string) string {
	return testutil.RequireTool(t, name, "apt-get install libcoap3-bin (scripts/setup.sh)")
}

// hostPort strips the scheme of a broker endpoint.
func hostPort(u string) string { return u[strings.Index(u, "://")+3:] }

// TestLibcoapThroughBroker: libcoap's coap-client observes and publishes
// through our broker over UDP, TCP and DTLS-PSK; an MQTT subscriber receives
// the CoAP publication and the CoAP observer the MQTT one.
func TestLibcoapThroughBroker(t *testing.T) {
	notls := needTool(t, "coap-client-notls")
	openssl := needTool(t, "coap-client-openssl")
	srv := startBroker(t, nil)
	ctx := context.Background()
	mq := dial(t, srv, "mqtt", client.Options{})
	fromCoAP := make(inbox, 16)
	live := func(m client.Message) { // see TestPubSubEveryTransport
		if !m.Retained {
			fromCoAP <- m
		}
	}
	if err := mq.Subscribe(ctx, "lib/#", client.SubscribeOptions{QoS: 1}, live); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		scheme string
		bin    string
		args   []string
	}{
		{"coap", notls, nil},
		{"coap+tcp", notls, nil},
		{"coaps", openssl, []string{"-u", "dev1", "-k", "secret1"}},
	} {
		t.Run(tc.scheme, func(t *testing.T) {
			name := strings.ReplaceAll(tc.scheme, "+", "-")
			uri := tc.scheme + "://" + hostPort(endpointOf(t, srv, tc.scheme)) + "/t/lib/" + name
			// The observer registers after its (DTLS) handshake; on a
			// loaded host libcoap sometimes gives up on that handshake
			// (seen 2 in ~12 runs for coaps), so a client that did not
			// register within 10 s is replaced, at most three times.
			var out, errOut bytes.Buffer
			var obs *exec.Cmd
			for attempt := 1; ; attempt++ {
				before := srv.CoAPStats().Observers
				out.Reset()
				errOut.Reset()
				obs = exec.Command(tc.bin, append(append([]string{}, tc.args...), "-s", "8", "-m", "get", "-w", uri)...)
				obs.Stdout, obs.Stderr = &out, &errOut
				if err := obs.Start(); err != nil {
					t.Fatal(err)
				}
				registered := false
				deadline := time.Now().Add(testutil.Scale(10 * time.Second))
				for time.Now().Before(deadline) {
					if srv.CoAPStats().Observers > before {
						registered = true
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				if registered {
					cmd := obs
					t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
					break
				}
				_ = obs.Process.Kill()
				_ = obs.Wait()
				if attempt == 3 {
					t.Fatalf("coap-client observer not registered after %d attempts (stderr of the last: %q)", attempt, errOut.String())
				}
				t.Logf("attempt %d: observer not registered within 10 s (stderr %q); starting another", attempt, errOut.String())
			}
			put := exec.Command(tc.bin, append(append([]string{}, tc.args...), "-m", "put", "-e", "v-"+name, uri)...)
			if b, err := put.CombinedOutput(); err != nil {
				t.Fatalf("coap-client put: %v: %s", err, b)
			}
			fromCoAP.want(t, "v-"+name)
			r, err := mq.Publish(ctx, "lib/"+name, []byte("mqtt-"+name), client.PublishOptions{QoS: 1})
			wait(t, r, err)
			fromCoAP.want(t, "mqtt-"+name)
			done := make(chan error, 1)
			go func() { done <- obs.Wait() }()
			select {
			case <-done:
			case <-time.After(testutil.Scale(20 * time.Second)):
				t.Fatal("coap-client observer did not end")
			}
			got := out.String()
			if !strings.Contains(got, "v-"+name) || !strings.Contains(got, "mqtt-"+name) {
				t.Fatalf("observer output %q (stderr %q): want v-%s and mqtt-%s", got, errOut.String(), name, name)
			}
		})
	}
}

// freePort returns a port p such that p and p+1 are free for both UDP and
// TCP on 127.0.0.1 (coap-server uses p for UDP and TCP, p+1 for DTLS and
// TLS). It draws from 20000-32000, below Linux's ephemeral range, where
// outgoing connections of other processes do not sit.
func freePort(t testing.TB) int {
	t.Helper()
	free := func(q int) bool {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", q))
		if err != nil {
			return false
		}
		_ = l.Close()
		u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: q})
		if err != nil {
			return false
		}
		_ = u.Close()
		return true
	}
	for i := 0; i < 500; i++ {
		p := 20000 + rand.IntN(12000)
		if free(p) && free(p+1) {
			return p
		}
	}
	t.Fatal("no free port pair in 20000-32000")
	return 0
}

// TestClientAgainstLibcoapServer: our client publishes to and observes a
// resource of libcoap's coap-server (-d: resources created by PUT) over
// UDP, TCP and DTLS-PSK.
func TestClientAgainstLibcoapServer(t *testing.T) {
	bin := needTool(t, "coap-server-openssl")
	port := freePort(t)
	srv := exec.Command(bin, "-A", "127.0.0.1", "-p", fmt.Sprint(port), "-d", "10", "-k", "secretPSK")
	var logs bytes.Buffer
	srv.Stdout, srv.Stderr = &logs, &logs
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	for _, tc := range []struct {
		url  string
		opts client.Options
	}{
		{fmt.Sprintf("coap://127.0.0.1:%d", port), client.Options{}},
		{fmt.Sprintf("coap+tcp://127.0.0.1:%d", port), client.Options{}},
		{fmt.Sprintf("coaps://127.0.0.1:%d", port+1), client.Options{Username: "user", Password: "secretPSK"}},
	} {
		t.Run(strings.SplitN(tc.url, ":", 2)[0], func(t *testing.T) {
			var c client.Client
			testutil.Eventually(t, 10*time.Second, func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				var err error
				c, err = client.Dial(ctx, tc.url, tc.opts)
				return err
			})
			defer c.Close()
			ctx := context.Background()
			topic := "lib" + fmt.Sprint(time.Now().UnixNano()%100000)
			r, err := c.Publish(ctx, topic, []byte("v0"), client.PublishOptions{QoS: 1})
			wait(t, r, err)
			box := make(inbox, 8)
			if err := c.Subscribe(ctx, topic, client.SubscribeOptions{QoS: 1}, box.handler); err != nil {
				t.Fatalf("%v (server log: %s)", err, logs.String())
			}
			box.want(t, "v0")
			for _, v := range []string{"v1", "v2"} {
				r, err := c.Publish(ctx, topic, []byte(v), client.PublishOptions{QoS: 1})
				wait(t, r, err)
				box.want(t, v)
			}
		})
	}
}
