package broker_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	pahov3 "github.com/eclipse/paho.mqtt.golang"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/internal/testutil"
)

// The crash test runs the broker in a child process (this test binary,
// started with IOTQ_CRASH_BROKER_STATE set) so that it can be killed with
// SIGKILL.
const crashStateEnv, crashListenEnv = "IOTQ_CRASH_BROKER_STATE", "IOTQ_CRASH_BROKER_LISTEN"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashStateEnv); dir != "" {
		os.Exit(crashBrokerMain(dir, os.Getenv(crashListenEnv)))
	}
	os.Exit(m.Run())
}

// crashBrokerMain serves until killed.
func crashBrokerMain(state, listen string) int {
	srv, err := broker.New(broker.Options{StateDir: state, Listen: []string{listen}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := srv.Start(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := srv.Ready(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("READY")
	select {} // until SIGKILL
}

// startCrashBroker starts the child broker and waits until it is ready.
func startCrashBroker(t *testing.T, state, listen string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashStateEnv+"="+state, crashListenEnv+"="+listen)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ok := sc.Scan() && sc.Text() == "READY"
		ready <- ok
		for sc.Scan() {
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatal("crash broker did not start")
		}
	case <-time.After(testutil.Scale(20 * time.Second)):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("crash broker not ready in time")
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// crashClient connects a paho MQTT 3.1.1 client to addr (host:port).
func crashClient(t *testing.T, addr, id string, clean bool, h pahov3.MessageHandler) (pahov3.Client, error) {
	o := pahov3.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(id).SetCleanSession(clean).
		SetAutoReconnect(false).SetConnectRetry(false).SetConnectTimeout(testutil.Scale(10 * time.Second)).
		SetWriteTimeout(testutil.Scale(10 * time.Second)).SetMaxResumePubInFlight(100)
	if h != nil {
		o.SetDefaultPublishHandler(h)
	}
	c := pahov3.NewClient(o)
	tok := c.Connect()
	if !tok.WaitTimeout(testutil.Scale(15*time.Second)) || tok.Error() != nil {
		return nil, fmt.Errorf("connect %s: %v", id, tok.Error())
	}
	return c, nil
}

// TestCrashLosesNoAcknowledgedMessage: a publisher sends numbered QoS 1
// messages as fast as it can to a persistent QoS 1 subscriber (online, or
// offline); the broker (default store) is killed with SIGKILL in the
// middle and restarted on the same state directory. Every message the
// broker acknowledged with PUBACK must reach the subscriber; duplicates are
// allowed (QoS 1) and counted.
func TestCrashLosesNoAcknowledgedMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	const n = 3000
	for _, online := range []bool{true, false} {
		for _, killAt := range []int{700, 2200} {
			name := fmt.Sprintf("online=%v/kill_at=%d", online, killAt)
			t.Run(name, func(t *testing.T) {
				lost, dups := crashRun(t, n, killAt, online)
				t.Logf("%s: lost %d acknowledged messages, %d duplicates", name, lost, dups)
			})
		}
	}
}

func crashRun(t *testing.T, n, killAt int, online bool) (lost, dups int) {
	state := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
	child := startCrashBroker(t, state, "mqtt://"+addr)

	var mu sync.Mutex
	got := map[string]int{}
	handler := func(_ pahov3.Client, m pahov3.Message) {
		mu.Lock()
		got[string(m.Payload())]++
		mu.Unlock()
	}
	sub, err := crashClient(t, addr, "crash-sub", false, handler)
	if err != nil {
		t.Fatal(err)
	}
	if tok := sub.Subscribe("crash/q", 1, handler); !tok.WaitTimeout(testutil.Scale(10*time.Second)) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	if !online {
		sub.Disconnect(100)
	}
	pub, err := crashClient(t, addr, "crash-pub", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	toks := make([]pahov3.Token, 0, n)
	for i := range n {
		toks = append(toks, pub.Publish("crash/q", 1, false, fmt.Sprintf("m%05d", i)))
		if i == killAt {
			if err := child.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = child.Wait()
			break
		}
		if i >= 100 { // at most ~100 in flight
			toks[i-100].WaitTimeout(testutil.Scale(10 * time.Second))
		}
	}
	// Acknowledged: tokens that completed without error before the kill
	// took effect.
	deadline := time.Now().Add(testutil.Scale(5 * time.Second))
	var acked []string
	for i, tok := range toks {
		if tok.WaitTimeout(time.Until(deadline)) && tok.Error() == nil {
			acked = append(acked, fmt.Sprintf("m%05d", i))
		}
	}
	pub.Disconnect(0)
	if online {
		sub.Disconnect(0)
	}
	if len(acked) < killAt/2 {
		t.Fatalf("only %d of %d messages acknowledged before the kill: the test did not load the broker", len(acked), killAt)
	}

	startCrashBroker(t, state, "mqtt://"+addr)
	sub, err = crashClient(t, addr, "crash-sub", false, handler)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Disconnect(100)
	// Wait (bounded) until every acknowledged message is back; what is
	// still missing then is lost. A sentinel published now must arrive too.
	pub, err = crashClient(t, addr, "crash-pub2", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Disconnect(100)
	if tok := pub.Publish("crash/q", 1, false, "sentinel"); !tok.WaitTimeout(testutil.Scale(10*time.Second)) || tok.Error() != nil {
		t.Fatalf("publish sentinel: %v", tok.Error())
	}
	end := time.Now().Add(testutil.Scale(20 * time.Second))
	for time.Now().Before(end) {
		mu.Lock()
		all := got["sentinel"] > 0
		for _, id := range acked {
			all = all && got[id] > 0
		}
		mu.Unlock()
		if all {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	var missing []string
	for _, id := range acked {
		if got[id] == 0 {
			missing = append(missing, id)
		}
	}
	for _, c := range got {
		dups += max(0, c-1)
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d acknowledged messages lost after SIGKILL at %d (online=%v): %s", len(missing), len(acked), killAt, online, strings.Join(missing[:min(10, len(missing))], " "))
	}
	return len(missing), dups
}

// TestReconnectUnderLoadLosesNothing: a persistent QoS 1 subscriber
// reconnects ten times while a publisher streams 20 000 numbered QoS 1
// messages; every acknowledged message reaches it (duplicates allowed).
// Messages delivered to the old connection while the session moved to the
// new one used to be lost (fork patch 6).
func TestReconnectUnderLoadLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	for _, store := range []string{broker.StoreNone, broker.StoreBolt} {
		t.Run("store="+store, func(t *testing.T) {
			srv := brokertest.Start(t, broker.Options{StateDir: t.TempDir(), Store: store})
			u := brokertest.Endpoint(t, srv, "mqtt")
			var mu sync.Mutex
			got := map[string]int{}
			h := func(_ pahov3.Client, m pahov3.Message) {
				mu.Lock()
				got[string(m.Payload())]++
				mu.Unlock()
			}
			persistent := func(o *pahov3.ClientOptions) { o.SetCleanSession(false).SetDefaultPublishHandler(h) }
			sub := v3Client(t, srv, u, "rsub", persistent)
			wait(t, sub.Subscribe("r/q", 1, h), "subscribe")
			pub := v3Client(t, srv, u, "rpub", nil)
			const n = 20000
			toks := make([]pahov3.Token, n)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := range n {
					toks[i] = pub.Publish("r/q", 1, false, fmt.Sprintf("m%05d", i))
					if i >= 100 {
						toks[i-100].WaitTimeout(testutil.Scale(10 * time.Second))
					}
				}
			}()
			for range 10 {
				time.Sleep(30 * time.Millisecond)
				sub.Disconnect(0)
				sub = v3Client(t, srv, u, "rsub", persistent)
			}
			<-done
			var acked []string
			for i, tok := range toks {
				if tok.WaitTimeout(testutil.Scale(10*time.Second)) && tok.Error() == nil {
					acked = append(acked, fmt.Sprintf("m%05d", i))
				}
			}
			var missing []string
			end := time.Now().Add(testutil.Scale(20 * time.Second))
			for {
				missing = missing[:0]
				mu.Lock()
				for _, id := range acked {
					if got[id] == 0 {
						missing = append(missing, id)
					}
				}
				dups := 0
				for _, c := range got {
					dups += max(0, c-1)
				}
				mu.Unlock()
				if len(missing) == 0 {
					t.Logf("%d acknowledged, 0 lost, %d duplicates", len(acked), dups)
					return
				}
				if time.Now().After(end) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Fatalf("%d of %d acknowledged messages never reached the reconnecting subscriber: %s", len(missing), len(acked), strings.Join(missing[:min(10, len(missing))], " "))
		})
	}
}
