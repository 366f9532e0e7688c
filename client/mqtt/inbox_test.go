package mqtt

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/iotq/iotq/client/internal/core"
	"github.com/iotq/iotq/internal/testutil"
)

// events records, in order, what handlers got and what was acknowledged.
type events struct {
	mu  sync.Mutex
	log []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	e.log = append(e.log, s)
	e.mu.Unlock()
}

func (e *events) get() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.log)
}

func (e *events) waitFor(t *testing.T, want []string) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, func() error {
		if got := e.get(); !slices.Equal(got, want) {
			return fmt.Errorf("events %q, want %q", got, want)
		}
		return nil
	})
}

func (e *events) msg(in *inbox, topic string, qos byte) {
	var ack func()
	if qos > 0 {
		ack = func() { e.add("ack " + topic) }
	}
	in.deliver(core.Message{Topic: topic, QoS: qos, Payload: []byte(topic)}, ack)
}

// TestInboxHoldsUntilSubscribe: messages that match no filter yet wait,
// unacknowledged, for the Subscribe that claims them and then come in
// arrival order, each acknowledged after its handler returned; messages
// on other topics are not held up by them.
func TestInboxHoldsUntilSubscribe(t *testing.T) {
	in := newInbox(slog.New(slog.DiscardHandler), maxHeld, maxHeldBytes)
	defer in.stop()
	var ev events
	h := func(m core.Message) { ev.add("got " + m.Topic) }
	ev.msg(in, "a/1", 1)
	ev.msg(in, "b/1", 1)
	ev.msg(in, "a/2", 0)
	ev.msg(in, "a/3", 2)
	in.subscribe("b/#", h)
	ev.waitFor(t, []string{"got b/1", "ack b/1"})
	ev.msg(in, "b/2", 1)
	in.subscribe("a/#", h)
	ev.msg(in, "a/4", 1)
	ev.waitFor(t, []string{"got b/1", "ack b/1", "got b/2", "ack b/2",
		"got a/1", "ack a/1", "got a/2", "got a/3", "ack a/3", "got a/4", "ack a/4"})
	if n := in.heldCount(); n != 0 {
		t.Fatalf("%d messages still held", n)
	}
}

// TestInboxFullHeldQueue: a message that finds the held queue full is
// dropped unacknowledged (the broker keeps it for the session); the held
// ones still come when claimed.
func TestInboxFullHeldQueue(t *testing.T) {
	in := newInbox(slog.New(slog.DiscardHandler), 2, maxHeldBytes)
	defer in.stop()
	var ev events
	for _, topic := range []string{"x/1", "x/2", "x/3"} {
		ev.msg(in, topic, 1)
	}
	in.subscribe("x/+", func(m core.Message) { ev.add("got " + m.Topic) })
	ev.msg(in, "x/4", 1)
	ev.waitFor(t, []string{"got x/1", "ack x/1", "got x/2", "ack x/2", "got x/4", "ack x/4"})
}

// TestInboxStop: stop waits for the running handler, whose message is then
// acknowledged, and leaves what was not handed over unacknowledged; a
// deliver waiting for room returns.
func TestInboxStop(t *testing.T) {
	in := newInbox(slog.New(slog.DiscardHandler), maxHeld, maxHeldBytes)
	var ev events
	release := make(chan struct{})
	in.subscribe("s/#", func(m core.Message) {
		ev.add("got " + m.Topic)
		if m.Topic == "s/0" {
			<-release
		}
	})
	ev.msg(in, "held/0", 1)
	ev.msg(in, "s/0", 1)
	ev.waitFor(t, []string{"got s/0"})
	// The handler blocks: fill the ready queue, and one more waits.
	for i := 1; i <= maxReady; i++ {
		ev.msg(in, fmt.Sprintf("s/%d", i), 1)
	}
	delivered := make(chan struct{})
	go func() {
		defer close(delivered)
		ev.msg(in, "s/last", 1)
	}()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		in.stop()
	}()
	select {
	case <-delivered:
	case <-time.After(testutil.Scale(5 * time.Second)):
		t.Fatal("deliver still waits after stop")
	}
	close(release)
	select {
	case <-stopped:
	case <-time.After(testutil.Scale(5 * time.Second)):
		t.Fatal("stop did not return")
	}
	in.stop() // idempotent
	if got, want := ev.get(), []string{"got s/0", "ack s/0"}; !slices.Equal(got, want) {
		t.Fatalf("events %q, want %q", got, want)
	}
}
