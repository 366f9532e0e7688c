package measure_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/client/measure"
	"github.com/iotq/iotq/internal/payload"
	"github.com/iotq/iotq/internal/testutil"
)

// run publishes with o through a real broker and returns the summary and
// the results in the order OnResult saw them.
func run(t *testing.T, url string, o measure.PublisherOptions) (measure.Summary, []measure.Result) {
	t.Helper()
	return runWrapped(t, url, o, func(c client.Client) client.Client { return c })
}

// slowFirstPublish holds its first hand-over back for hold, as a client
// does whose socket or stream is full.
type slowFirstPublish struct {
	client.Client
	hold time.Duration
	once sync.Once
}

func (c *slowFirstPublish) Publish(ctx context.Context, topic string, payload []byte, o client.PublishOptions) (*client.Receipt, error) {
	c.once.Do(func() { time.Sleep(c.hold) })
	return c.Client.Publish(ctx, topic, payload, o)
}

// runWrapped is run with the dialled client wrapped by wrap.
func runWrapped(t *testing.T, url string, o measure.PublisherOptions, wrap func(client.Client) client.Client) (measure.Summary, []measure.Result) {
	t.Helper()
	var mu sync.Mutex
	var res []measure.Result
	o.OnResult = func(r measure.Result) { mu.Lock(); res = append(res, r); mu.Unlock() }
	p, err := measure.NewPublisher(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(20*time.Second))
	defer cancel()
	early, ok := p.EarlyMessage(ctx)
	if !ok {
		t.Fatal("EarlyMessage: gate closed")
	}
	c, err := client.Dial(ctx, url, client.Options{Early: early})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sum := p.Run(ctx, wrap(c))
	mu.Lock()
	defer mu.Unlock()
	return sum, res
}

func TestPublisher(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{})
	url := brokertest.Endpoint(t, srv, "mqtt")

	t.Run("closed loop: each message leaves after the previous receipt", func(t *testing.T) {
		sum, res := run(t, url, measure.PublisherOptions{Topic: "m/c", QoS: 1, Size: 32, Count: 5, ClosedLoop: true, AckWait: 10 * time.Second})
		if sum.Acked != 5 || len(res) != 5 {
			t.Fatalf("summary %+v, %d results", sum, len(res))
		}
		for i := 1; i < len(res); i++ {
			if res[i].SendNs < res[i-1].AcceptedNs {
				t.Fatalf("message %d sent at %d before message %d's receipt at %d", i, res[i].SendNs, i-1, res[i-1].AcceptedNs)
			}
		}
	})

	t.Run("every message is reported in order with its receipt", func(t *testing.T) {
		sum, res := run(t, url, measure.PublisherOptions{Topic: "m/a", QoS: 1, Size: 32, Count: 5, AckWait: 10 * time.Second})
		if sum.Sent != 5 || sum.Acked != 5 || sum.Failed != 0 || len(res) != 5 {
			t.Fatalf("summary %+v, %d results", sum, len(res))
		}
		for i, r := range res {
			if r.Seq != uint32(i) || r.Size != 32 || r.Err != nil || r.AcceptedNs < r.SendNs {
				t.Fatalf("result %d: %+v", i, r)
			}
		}
		// The last acceptance is the latest receipt time, which need not
		// be the last message's: receipts are stamped where they complete.
		var last int64
		for _, r := range res {
			last = max(last, r.AcceptedNs)
		}
		if sum.FirstSendNs != res[0].SendNs || sum.LastAcceptedNs != last {
			t.Fatalf("summary times %+v vs results %+v", sum, res)
		}
	})

	t.Run("the gate releases one message per value and its end stops the run", func(t *testing.T) {
		gate := make(chan struct{}, 3)
		for range 3 {
			gate <- struct{}{}
		}
		close(gate)
		sum, _ := run(t, url, measure.PublisherOptions{Topic: "m/b", Message: []byte("x"), Count: 10, Gate: gate, AckWait: 5 * time.Second})
		if sum.Sent != 3 || sum.Acked != 3 {
			t.Fatalf("summary %+v, want 3 sent and acked", sum)
		}
	})

	t.Run("messages leave no earlier than their interval slot", func(t *testing.T) {
		const iv = 20 * time.Millisecond
		_, res := run(t, url, measure.PublisherOptions{Topic: "m/c", Message: []byte("x"), Count: 4, Interval: iv, AckWait: 5 * time.Second})
		for i := 1; i < len(res); i++ {
			if d := time.Duration(res[i].SendNs - res[0].SendNs); d < time.Duration(i)*iv {
				t.Fatalf("message %d left %v after message 0, before its slot %v", i, d, time.Duration(i)*iv)
			}
		}
		// Each message's due time is message 0's send time plus its slot,
		// so the records alone tell how late it left.
		for i, r := range res {
			if want := res[0].SendNs + int64(i)*int64(iv); r.DueNs != want || r.SendNs < r.DueNs {
				t.Fatalf("message %d: due %d (want %d), sent %d", i, r.DueNs, want, r.SendNs)
			}
		}
	})

	t.Run("a hand-over that blocks past the next slot moves that message's ready time, not its due time", func(t *testing.T) {
		const iv = 20 * time.Millisecond
		_, res := runWrapped(t, url, measure.PublisherOptions{Topic: "m/g", Message: []byte("x"), Count: 3, Interval: iv, AckWait: 5 * time.Second},
			func(c client.Client) client.Client { return &slowFirstPublish{Client: c, hold: 3 * iv} })
		if len(res) != 3 {
			t.Fatalf("results %+v", res)
		}
		if r := res[0]; r.ReadyNs != r.DueNs || r.DueNs != r.SendNs {
			t.Fatalf("message 0: ready %d, due %d, sent %d: want all equal", r.ReadyNs, r.DueNs, r.SendNs)
		}
		// Message 0's hand-over returned 3 intervals after it left: message
		// 1 (due 1 interval after) could not leave before that.
		r := res[1]
		if r.ReadyNs < res[0].SendNs+int64(3*iv) || r.ReadyNs <= r.DueNs || r.SendNs < r.ReadyNs {
			t.Fatalf("message 1: ready %d, due %d, sent %d, message 0 sent %d: want due < message 0 + %v <= ready <= sent",
				r.ReadyNs, r.DueNs, r.SendNs, res[0].SendNs, 3*iv)
		}
	})

	t.Run("unpaced messages have no due time", func(t *testing.T) {
		_, res := run(t, url, measure.PublisherOptions{Topic: "m/f", Message: []byte("x"), Count: 2, AckWait: 5 * time.Second})
		for _, r := range res {
			if r.DueNs != 0 || r.ReadyNs != 0 {
				t.Fatalf("back-to-back message with due or ready time: %+v", r)
			}
		}
	})

	t.Run("an early message rides with CONNECT and is reported as message 0", func(t *testing.T) {
		sum, res := run(t, url, measure.PublisherOptions{Topic: "m/d", Size: 24, Count: 2, Early: true, AckWait: 5 * time.Second})
		if sum.Sent != 2 || sum.Acked != 2 || res[0].Seq != 0 || res[0].Err != nil {
			t.Fatalf("summary %+v, results %+v", sum, res)
		}
	})

	t.Run("measurement payloads carry the run id", func(t *testing.T) {
		p, err := measure.NewPublisher(measure.PublisherOptions{Topic: "m/e", Size: 24, Count: 1, Early: true, RunID: 77})
		if err != nil {
			t.Fatal(err)
		}
		m, _ := p.EarlyMessage(context.Background())
		if h, err := payload.Decode(m.Payload); err != nil || h.RunID != 77 || h.Seq != 0 {
			t.Fatalf("early payload header %+v, %v", h, err)
		}
	})
}

func TestPublisherOptionsValidate(t *testing.T) {
	err := measure.PublisherOptions{Topic: "a/#", QoS: 2, Size: 8, Count: 0, Early: true}.Validate()
	for _, want := range []string{"must not contain + or #", "minimum is 16", "count 0", "early needs QoS 0 or 1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to contain %q", err, want)
		}
	}
}
