package amqp_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/internal/testutil"
)

// protonPython returns a Python that imports proton: Debian's
// /usr/bin/python3 (python3-qpid-proton is installed for it) or python3 on
// PATH. It skips (or fails under CI=true) when neither does.
func protonPython(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(py, "-c", "import proton").Run() == nil {
			return py
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("python3-qpid-proton missing (scripts/setup.sh installs it)")
	}
	t.Skip("python3-qpid-proton missing: apt-get install python3-qpid-proton")
	return ""
}

// TestProtonInterop: an independent AMQP client (Apache Qpid Proton,
// Python) and ours exchange messages through Artemis, both ways.
func TestProtonInterop(t *testing.T) {
	py := protonPython(t)
	art := testutil.StartArtemis(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(90*time.Second))
	defer cancel()
	hostport := strings.TrimPrefix(art.URL(), "amqp://")

	t.Run("proton sends, we receive", func(t *testing.T) {
		sub := dial(t, ctx, art.URL(), client.Options{})
		col := make(collector, 10)
		if err := sub.Subscribe(ctx, "iotq.interop.in", client.SubscribeOptions{QoS: 1}, col.handle); err != nil {
			t.Fatal(err)
		}
		out, err := exec.CommandContext(ctx, py, "testdata/proton_peer.py", "send", hostport, "iotq.interop.in", "3").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "sent 3") {
			t.Fatalf("proton send: %v: %s", err, out)
		}
		for i, m := range col.wait(t, 3) {
			if string(m.Payload) != fmt.Sprintf("p%d", i) {
				t.Fatalf("message %d: %q", i, m.Payload)
			}
		}
	})

	t.Run("we send, proton receives", func(t *testing.T) {
		cmd := exec.CommandContext(ctx, py, "testdata/proton_peer.py", "recv", hostport, "iotq.interop.out", "3", "20")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 10)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		next := func() string {
			select {
			case l, ok := <-lines:
				if !ok {
					_ = cmd.Wait()
					t.Fatalf("proton receiver ended early: %s", stderr.String())
				}
				return l
			case <-time.After(testutil.Scale(30 * time.Second)):
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("proton receiver silent: %s", stderr.String())
			}
			return ""
		}
		if l := next(); l != "ready" {
			t.Fatalf("proton receiver: %q", l)
		}
		pub := dial(t, ctx, art.URL(), client.Options{})
		for i, qos := range []byte{1, 0, 1} {
			r, err := pub.Publish(ctx, "iotq.interop.out", []byte(fmt.Sprintf("g%d", i)), client.PublishOptions{QoS: qos})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 3 {
			if l := next(); l != fmt.Sprintf("g%d", i) {
				t.Fatalf("proton got %q, want g%d", l, i)
			}
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("proton receiver: %v: %s", err, stderr.String())
		}
	})
}
