package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pahopackets "github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	pahov3 "github.com/eclipse/paho.mqtt.golang"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/internal/testutil"
)

func TestPersistentSessionSurvivesRestart(t *testing.T) {
	state := t.TempDir()
	opts := broker.Options{StateDir: state}
	srv := brokertest.Start(t, opts)
	u := brokertest.Endpoint(t, srv, "mqtt")
	box := newInbox()
	persistent := func(o *pahov3.ClientOptions) {
		o.SetCleanSession(false).SetDefaultPublishHandler(box.v3Handler())
	}
	sub := v3Client(t, srv, u, "sleepy", persistent)
	wait(t, sub.Subscribe("p/t", 1, box.v3Handler()), "subscribe")
	sub.Disconnect(100)

	pub := v3Client(t, srv, u, "pub", nil)
	for i := range 5 {
		wait(t, pub.Publish("p/t", 1, false, fmt.Sprintf("m%d", i)), "publish")
	}
	wait(t, pub.Publish("p/retained", 1, true, "kept"), "publish retained")
	pub.Disconnect(100)
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}

	srv2 := brokertest.Start(t, opts)
	u2 := brokertest.Endpoint(t, srv2, "mqtt")
	v3Client(t, srv2, u2, "sleepy", persistent)
	got := box.waitN(t, 5, 10*time.Second)
	seen := map[string]bool{}
	for _, m := range got {
		seen[m.payload] = true
	}
	for i := range 5 {
		if !seen[fmt.Sprintf("m%d", i)] {
			t.Errorf("m%d lost across restart; got %v", i, got)
		}
	}
	box2 := newInbox()
	late := v3Client(t, srv2, u2, "late", nil)
	wait(t, late.Subscribe("p/retained", 1, box2.v3Handler()), "subscribe")
	if g := box2.waitN(t, 1, 10*time.Second); g[0].payload != "kept" {
		t.Fatalf("retained after restart: %+v", g)
	}
}

func TestAuthAndACL(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "passwd")
	for _, up := range [][2]string{{"alice", "wonder"}, {"bob", "builder"}} {
		if err := broker.SetPassword(pw, up[0], []byte(up[1])); err != nil {
			t.Fatal(err)
		}
	}
	acl := filepath.Join(dir, "acl")
	if err := os.WriteFile(acl, []byte("user alice\ntopic write sensors/#\ntopic read alice/#\nuser bob\ntopic read sensors/#\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	no := false
	srv := brokertest.Start(t, broker.Options{Auth: broker.AuthOptions{PasswordFile: pw, ACLFile: acl, AllowAnonymous: &no}})
	u := brokertest.Endpoint(t, srv, "mqtt")

	refused := func(name, user, pass string) {
		t.Run(name+" is refused", func(t *testing.T) {
			o := pahov3.NewClientOptions().AddBroker("tcp://" + strings.TrimPrefix(u, "mqtt://")).SetClientID(name).
				SetUsername(user).SetPassword(pass).SetAutoReconnect(false).SetConnectTimeout(5 * time.Second)
			c := pahov3.NewClient(o)
			tok := c.Connect()
			tok.WaitTimeout(10 * time.Second)
			if tok.Error() == nil {
				c.Disconnect(0)
				t.Fatal("connected")
			}
		})
	}
	refused("anonymous", "", "")
	refused("wrong password", "alice", "nope")
	refused("unknown user", "mallory", "x")

	creds := func(u, p string) func(*pahov3.ClientOptions) {
		return func(o *pahov3.ClientOptions) { o.SetUsername(u).SetPassword(p) }
	}
	bobBox, aliceBox := newInbox(), newInbox()
	bob := v3Client(t, srv, u, "bob", creds("bob", "builder"))
	wait(t, bob.Subscribe("sensors/#", 1, bobBox.v3Handler()), "bob subscribe")
	wait(t, bob.Subscribe("alice/#", 1, bobBox.v3Handler()), "bob subscribe alice/#")
	alice := v3Client(t, srv, u, "alice", creds("alice", "wonder"))
	wait(t, alice.Subscribe("alice/#", 1, aliceBox.v3Handler()), "alice subscribe")

	// Denied QoS 0 publishes are dropped silently (MQTT 3.1.1); QoS 1
	// denied writes disconnect a 3.1.1 client, so use QoS 0 for the denial.
	wait(t, alice.Publish("alice/inbox", 0, false, "denied-write"), "alice publish to her read-only topic")
	wait(t, bob.Publish("alice/x", 0, false, "bob-denied"), "bob publish denied")
	wait(t, alice.Publish("sensors/t1", 1, false, "21.5"), "alice publish")
	bobBox.waitN(t, 1, 10*time.Second) // fails the test if 21.5 never arrives
	time.Sleep(200 * time.Millisecond) // give denied messages time to (wrongly) arrive
	if got := bobBox.waitN(t, 1, time.Second); len(got) != 1 || got[0].payload != "21.5" {
		t.Fatalf("bob got %v, want only 21.5", got)
	}
	if n := aliceBox.len(); n != 0 {
		t.Fatalf("alice received %d messages on a topic nobody may write", n)
	}
}

func TestBadInputDoesNotHurtOthers(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{Flow: broker.FlowOptions{MaxPacketSize: 64 << 10}})
	u := brokertest.Endpoint(t, srv, "mqtt")
	addr := strings.TrimPrefix(u, "mqtt://")
	box := newInbox()
	sub := v3Client(t, srv, u, "good-sub", nil)
	wait(t, sub.Subscribe("ok", 0, box.v3Handler()), "subscribe")
	pub := v3Client(t, srv, u, "good-pub", nil)

	connect := []byte{0x10, 0x10, 0, 4, 'M', 'Q', 'T', 'T', 4, 2, 0, 30, 0, 4, 'e', 'v', 'i', 'l'}
	cases := []struct {
		name string
		data []byte
	}{
		{"garbage instead of CONNECT", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		{"malformed remaining length", []byte{0x10, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{"oversized CONNECT", append([]byte{0x10, 0x80, 0x80, 0x80, 0x01}, bytes.Repeat([]byte{0}, 100)...)},
		{"oversized PUBLISH after CONNECT", append(append([]byte{}, connect...), 0x30, 0x80, 0x80, 0x40, 0, 1, 'x')},
		{"second CONNECT", append(append([]byte{}, connect...), connect...)},
		{"bad protocol name", []byte{0x10, 0x10, 0, 4, 'M', 'Q', 'X', 'X', 4, 2, 0, 30, 0, 4, 'e', 'v', 'i', 'l'}},
	}
	for _, c := range cases {
		t.Run(c.name+" closes only that connection", func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.Write(c.data); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(testutil.Scale(5 * time.Second)))
			_, err = io.ReadAll(conn) // reads CONNACK (if any) until the broker closes
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("broker kept the connection open after %s", c.name)
			}
			payload := "still-" + c.name
			n := box.len()
			wait(t, pub.Publish("ok", 0, false, payload), "publish")
			got := box.waitN(t, n+1, 5*time.Second)
			if got[len(got)-1].payload != payload {
				t.Fatalf("good client got %+v", got[len(got)-1])
			}
		})
	}
}

func TestGracefulShutdown(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{})
	u := brokertest.Endpoint(t, srv, "mqtt")
	reason := make(chan byte, 1)
	conn := dial(t, srv, u)
	c := paho.NewClient(paho.ClientConfig{ClientID: "v5", Conn: pahopackets.NewThreadSafeConn(conn),
		OnServerDisconnect: func(d *paho.Disconnect) { reason <- d.ReasonCode }})
	if _, err := c.Connect(ctxT(t), &paho.Connect{ClientID: "v5", KeepAlive: 30, CleanStart: true}); err != nil {
		t.Fatal(err)
	}
	v3 := v3Client(t, srv, u, "v3", nil)
	start := time.Now()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > testutil.Scale(3*time.Second) {
		t.Errorf("Close took %v", d)
	}
	select {
	case r := <-reason:
		if r != 0x8B {
			t.Errorf("DISCONNECT reason %#x, want 0x8B server shutting down", r)
		}
	case <-time.After(testutil.Scale(5 * time.Second)):
		t.Error("MQTT 5 client got no DISCONNECT")
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if v3.IsConnectionOpen() {
			return notYet("v3 client still connected")
		}
		return nil
	})
	if _, err := net.DialTimeout("tcp", strings.TrimPrefix(u, "mqtt://"), time.Second); err == nil {
		t.Error("listener still accepts after Close")
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := srv.Start(context.Background()); err == nil {
		t.Error("Start after Close succeeded")
	}
}

func TestStartContextCancelCloses(t *testing.T) {
	srv, err := broker.New(broker.Options{Listen: []string{"mqtt://127.0.0.1:0"}, Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	addr := srv.Addrs()[0].String()
	cancel()
	testutil.Eventually(t, 5*time.Second, func() error {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return notYet("still accepting")
		}
		return nil
	})
	_ = srv.Close()
}

func TestReadyFileMetricsAndHealth(t *testing.T) {
	dir := t.TempDir()
	rf := filepath.Join(dir, "ready.json")
	srv := brokertest.Start(t, broker.Options{ReadyFile: rf, Metrics: "127.0.0.1:0"})
	b, err := os.ReadFile(rf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), srv.Endpoints()[0]) || !strings.Contains(string(b), fmt.Sprintf(`"pid": %d`, os.Getpid())) {
		t.Fatalf("ready file: %s", b)
	}
	u := brokertest.Endpoint(t, srv, "mqtt")
	box := newInbox()
	sub := v3Client(t, srv, u, "msub", nil)
	wait(t, sub.Subscribe("m", 1, box.v3Handler()), "subscribe")
	pub := v3Client(t, srv, u, "mpub", nil)
	for range 3 {
		wait(t, pub.Publish("m", 1, false, "x"), "publish")
	}
	box.waitN(t, 3, 5*time.Second)
	base := "http://" + srv.MetricsAddr().String()
	get := func(path string) string {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %s %s", path, resp.Status, b)
		}
		return string(b)
	}
	if h := get("/healthz"); h != "ok\n" {
		t.Fatalf("healthz %q", h)
	}
	// Counters are updated right after each write, so a client can see a
	// message a moment before the broker has counted it.
	testutil.Eventually(t, 5*time.Second, func() error {
		m := get("/metrics")
		for _, want := range []string{
			`iotq_broker_messages_received_total{qos="1"} 3`,
			`iotq_broker_messages_sent_total{qos="1"} 3`,
			`iotq_broker_connections_open{transport="mqtt"} 2`,
			`iotq_broker_messages_dropped_total{qos="0",reason="queue_full"} 0`,
			`iotq_broker_clients_connected 2`,
		} {
			if !strings.Contains(m, want) {
				return notYet("metrics lack %q", want)
			}
		}
		return nil
	})
}

// TestPprofEndpoints: --pprof serves a heap profile on the metrics
// address; without it /debug/pprof/ is not found; pprof without metrics
// is refused with the key to set.
func TestPprofEndpoints(t *testing.T) {
	status := func(srv *broker.Server, path string) (int, []byte) {
		t.Helper()
		resp, err := http.Get("http://" + srv.MetricsAddr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	on := brokertest.Start(t, broker.Options{Metrics: "127.0.0.1:0", Pprof: true})
	if code, b := status(on, "/debug/pprof/heap?debug=1"); code != 200 || !strings.Contains(string(b), "heap profile") {
		t.Fatalf("pprof on: heap profile: %d %.200s", code, b)
	}
	if code, b := status(on, "/debug/pprof/goroutine?debug=1"); code != 200 || !strings.Contains(string(b), "goroutine profile") {
		t.Fatalf("pprof on: goroutine profile: %d %.200s", code, b)
	}
	off := brokertest.Start(t, broker.Options{Metrics: "127.0.0.1:0"})
	if code, _ := status(off, "/debug/pprof/heap?debug=1"); code != 404 {
		t.Fatalf("pprof off: /debug/pprof/heap answered %d, want 404", code)
	}
	err := broker.Options{Pprof: true}.Validate()
	if err == nil || !strings.Contains(err.Error(), "pprof") || !strings.Contains(err.Error(), "--metrics") {
		t.Fatalf("pprof without metrics: got %v, want an error naming pprof and --metrics", err)
	}
}

func TestMosquittoClients(t *testing.T) {
	testutil.RequireTool(t, "mosquitto_pub", "apt-get install mosquitto-clients")
	srv, schemes := startMatrixBroker(t, broker.Options{})
	for i, scheme := range schemes {
		if scheme != "mqtt" && scheme != "mqtts" {
			continue
		}
		t.Run(scheme, func(t *testing.T) {
			host, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.Endpoints()[i], scheme+"://"))
			args := []string{"-h", host, "-p", port}
			if scheme == "mqtts" {
				args = append(args, "--cafile", srv.CAFile())
			}
			for _, v := range []string{"mqttv311", "mqttv5"} {
				ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(15*time.Second))
				defer cancel()
				topic := "mosq/" + scheme + "/" + v
				sub := exec.CommandContext(ctx, "mosquitto_sub", append(args, "-V", v, "-t", topic, "-C", "3", "-q", "1", "-i", "msub-"+v)...)
				var out bytes.Buffer
				sub.Stdout, sub.Stderr = &out, &out
				if err := sub.Start(); err != nil {
					t.Fatal(err)
				}
				testutil.Eventually(t, 5*time.Second, func() error {
					if st := subscribed(srv, "msub-"+v); !st {
						return notYet("mosquitto_sub not subscribed")
					}
					return nil
				})
				for q := range 3 {
					pub := exec.CommandContext(ctx, "mosquitto_pub", append(args, "-V", v, "-t", topic, "-q", fmt.Sprint(q), "-m", fmt.Sprintf("hello-%d", q))...)
					if b, err := pub.CombinedOutput(); err != nil {
						t.Fatalf("mosquitto_pub: %v: %s", err, b)
					}
				}
				if err := sub.Wait(); err != nil {
					t.Fatalf("mosquitto_sub: %v: %s", err, out.String())
				}
				if got := out.String(); got != "hello-0\nhello-1\nhello-2\n" {
					t.Fatalf("%s: mosquitto_sub printed %q", v, got)
				}
			}
		})
	}
}

// subscribed reports whether client id is connected with a subscription.
func subscribed(srv *broker.Server, id string) bool {
	return srv.Subscriptions(id) > 0
}

func scrape(t *testing.T, srv *broker.Server) string {
	t.Helper()
	resp, err := http.Get("http://" + srv.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// metricValue returns the value of the sample named exactly key (name plus
// labels as Prometheus prints them), or -1.
func metricValue(text, key string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f
			}
		}
	}
	return -1
}

func TestStartFailsClearlyWhenPortIsTaken(t *testing.T) {
	first := brokertest.Start(t, broker.Options{})
	srv, err := broker.New(broker.Options{Listen: []string{"mqtt://127.0.0.1:0", first.Endpoints()[0]}, Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), first.Endpoints()[0]) || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("Start = %v, want an address-in-use error naming %s", err, first.Endpoints()[0])
	}
	if err := srv.Ready(context.Background()); err == nil {
		t.Fatal("Ready after a failed Start returned nil")
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	// The first broker is untouched.
	v3Client(t, first, first.Endpoints()[0], "still-ok", nil)
}

func TestInvalidOptionsReportEverything(t *testing.T) {
	_, err := broker.New(broker.Options{
		Listen: []string{"tcp://:1883", "carrier-pigeon://x"},
		TLS:    broker.TLSOptions{Cert: "only-cert.pem"},
		Flow:   broker.FlowOptions{SlowConsumer: "panic", QueueLength: -1},
		Limits: broker.LimitsOptions{MaxQueuedBytes: -2},
	})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"listen[1]", "tls: give both cert and key", "flow.slow_consumer", "flow.queue_length", "limits.max_queued_bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

// TestCloseDoesNotWaitForSilentConnections: a connection that never sends
// CONNECT does not hold Close beyond the shutdown timeout.
func TestCloseDoesNotWaitForSilentConnections(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{ShutdownTimeout: 300 * time.Millisecond})
	c, err := net.Dial("tcp", srv.Addrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(50 * time.Millisecond) // let the broker accept it
	start := time.Now()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > testutil.Scale(5*time.Second) {
		t.Fatalf("Close took %v with a silent connection open", d)
	}
	_ = c.SetReadDeadline(time.Now().Add(testutil.Scale(5 * time.Second)))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("silent connection still open after Close")
	}
}

func TestSecondBrokerOnSameStateDirFails(t *testing.T) {
	state := t.TempDir()
	brokertest.Start(t, broker.Options{StateDir: state})
	start := time.Now()
	_, err := broker.New(broker.Options{StateDir: state})
	if err == nil || !strings.Contains(err.Error(), "another broker") {
		t.Fatalf("New = %v, want an error saying the state directory is in use", err)
	}
	if d := time.Since(start); d > testutil.Scale(10*time.Second) {
		t.Fatalf("took %v", d)
	}
}
