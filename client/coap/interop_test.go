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

	"github.com/iotq/iotq/broker"
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
			// On a loaded host libcoap sometimes gives up on its DTLS
			// handshake; an observer that did not register is logged with
			// what the broker counted and the client's exit, and replaced,
			// at most three times. Each attempt publishes its own payloads,
			// so a late notification of an earlier attempt cannot pass.
			for attempt := 1; ; attempt++ {
				problem := observeRoundTrip(t, srv, mq, fromCoAP, tc.bin, tc.args, uri, fmt.Sprintf("%s-%d", name, attempt))
				if problem == "" {
					return
				}
				if attempt == 3 {
					t.Fatalf("attempt %d: %s", attempt, problem)
				}
				t.Logf("attempt %d: %s; starting another", attempt, problem)
			}
		})
	}
}

// observeRoundTrip runs one libcoap observer of uri, publishes v-tag with a
// libcoap PUT and mqtt-tag over MQTT, and checks that the MQTT subscriber
// (inbox) got v-tag and the observer printed both. An observer that did not
// register is the client's trouble: it returns what went wrong, for the
// caller to try again. Once it has registered, a notification it did not
// print is the broker's and ends the test.
func observeRoundTrip(t *testing.T, srv *broker.Server, mq client.Client, fromCoAP inbox, bin string, args []string, uri, tag string) string {
	t.Helper()
	topic := "lib/" + tagTopic(uri)
	r, err := mq.Publish(context.Background(), topic, []byte("r-"+tag), client.PublishOptions{QoS: 1, Retain: true})
	wait(t, r, err)
	fromCoAP.want(t, "r-"+tag) // the live copy of the retained value
	before := srv.CoAPStats()
	var out, errOut testutil.SyncBuffer
	// stdbuf -oL: coap-client's stdout is a pipe, fully buffered by
	// stdio; line buffering lets the test read each notification as it
	// is printed (-w ends each with a newline) rather than at exit.
	obs := exec.Command("stdbuf", append([]string{"-oL", bin}, append(append([]string{}, args...), "-s", "20", "-m", "get", "-w", uri)...)...)
	obs.Stdout, obs.Stderr = &out, &errOut
	if err := obs.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- obs.Wait() }()
	defer func() {
		_ = obs.Process.Kill()
		<-exited
	}()
	diag := func(what string) string {
		now := srv.CoAPStats()
		return fmt.Sprintf("%s (observers %d -> %d, notifications %d -> %d, notify failures %d -> %d, DTLS handshakes %d -> %d, failures %d -> %d; requests %d -> %d; observer stdout %q, stderr %q)",
			what, before.Observers, now.Observers, before.Notifications, now.Notifications, before.NotifyFailures, now.NotifyFailures,
			before.DTLS.Handshakes, now.DTLS.Handshakes, before.DTLS.HandshakeFailures, now.DTLS.HandshakeFailures, before.Requests, now.Requests, out.String(), tail(errOut.String(), 6000))
	}
	// The registration's response carries the topic's retained value, so
	// the observer has registered once it has printed that.
	deadline := time.Now().Add(testutil.Scale(10 * time.Second))
	for !strings.Contains(out.String(), "r-"+tag+"\n") {
		select {
		case err := <-exited:
			exited <- err
			return diag(fmt.Sprintf("observer exited (%v) before it registered", err))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return diag("observer not registered within 10 s")
		}
	}
	put := exec.Command(bin, append(append([]string{}, args...), "-m", "put", "-e", "v-"+tag, uri)...)
	if b, err := put.CombinedOutput(); err != nil {
		t.Fatalf("coap-client put: %v: %s", err, b)
	}
	fromCoAP.want(t, "v-"+tag)
	r, err = mq.Publish(context.Background(), topic, []byte("mqtt-"+tag), client.PublishOptions{QoS: 1})
	wait(t, r, err)
	fromCoAP.want(t, "mqtt-"+tag)
	deadline = time.Now().Add(testutil.Scale(10 * time.Second))
	for {
		got := out.String()
		if strings.Contains(got, "v-"+tag+"\n") && strings.Contains(got, "mqtt-"+tag+"\n") {
			return ""
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatal(diag(fmt.Sprintf("observer exited (%v) without printing v-%s and mqtt-%s", err, tag, tag)))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal(diag(fmt.Sprintf("observer did not print v-%s and mqtt-%s within 10 s", tag, tag)))
		}
	}
}

// tagTopic is the MQTT topic of a /t/lib/NAME resource URI: NAME.
func tagTopic(uri string) string { return uri[strings.LastIndex(uri, "/")+1:] }

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

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
