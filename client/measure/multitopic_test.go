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
	"github.com/iotq/iotq/internal/testutil"
)

// TestMultiTopicSchedule: the topics' phases are spread evenly over the
// interval, the large topic sits half a topic slot after topic 0 and runs
// only while the periodic topics do, and seq counts across every topic in
// the order the messages are due.
func TestMultiTopicSchedule(t *testing.T) {
	o := measure.MultiTopicOptions{Topic: "d", Topics: 4, Size: 100, Count: 3, Interval: 100 * time.Millisecond,
		LargeSize: 1000, LargeInterval: 130 * time.Millisecond}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	slots := o.Schedule()
	type want struct {
		topic string
		at    time.Duration
	}
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	// topics at 0, 25, 50, 75 ms (+100, +200); large at 12.5, 142.5, 272.5 ms (< 300)
	exp := []want{
		{"d/0", 0}, {"d/large", ms(12.5)}, {"d/1", ms(25)}, {"d/2", ms(50)}, {"d/3", ms(75)},
		{"d/0", ms(100)}, {"d/1", ms(125)}, {"d/large", ms(142.5)}, {"d/2", ms(150)}, {"d/3", ms(175)},
		{"d/0", ms(200)}, {"d/1", ms(225)}, {"d/2", ms(250)}, {"d/large", ms(272.5)}, {"d/3", ms(275)},
	}
	if len(slots) != len(exp) {
		t.Fatalf("%d slots, want %d: %+v", len(slots), len(exp), slots)
	}
	for i, s := range slots {
		if s.Seq != uint32(i) || s.Topic != exp[i].topic || s.At != exp[i].at || s.Large != strings.HasSuffix(s.Topic, "/large") {
			t.Errorf("slot %d: %+v, want seq %d %s at %s", i, s, i, exp[i].topic, exp[i].at)
		}
	}
	// without the large topic: the periodic slots alone, ties in topic order
	o.LargeSize, o.LargeInterval = 0, 0
	o.Topics, o.Interval = 2, 10*time.Millisecond
	got := o.Schedule()
	if len(got) != 6 || got[0].Topic != "d/0" || got[1].Topic != "d/1" || got[1].At != 5*time.Millisecond || got[5].At != 25*time.Millisecond {
		t.Errorf("two topics: %+v", got)
	}
}

// TestMultiTopicValidate: every problem at once, each saying what to give.
func TestMultiTopicValidate(t *testing.T) {
	err := measure.MultiTopicOptions{Topic: "a/#", Topics: 0, Size: 0, Count: 0, LargeSize: 100}.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, w := range []string{"must not contain + or #", "topics 0: want 1 to 1000", "measurement payloads", "count 0",
		"positive interval", "needs its interval"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
	if err := (measure.MultiTopicOptions{Topic: "a", Topics: 1, Size: 16, Count: 1, Interval: time.Second, LargeInterval: time.Second}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "give both or neither") {
		t.Errorf("large interval without size: %v", err)
	}
}

// TestMultiPublisherRun publishes a multi-topic run at QoS 1 through a real
// broker: every slot is reported once with its topic, accepted, not before
// it was due, and the subscriber sees every topic's messages.
func TestMultiPublisherRun(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{})
	url := brokertest.Endpoint(t, srv, "mqtt")
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(20*time.Second))
	defer cancel()

	sc, err := client.Dial(ctx, url, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	var mu sync.Mutex
	recv := map[string]int{}
	if err := sc.Subscribe(ctx, "mt/#", client.SubscribeOptions{QoS: 1}, func(m client.Message) {
		mu.Lock()
		recv[m.Topic]++
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}

	var res []measure.Result
	o := measure.MultiTopicOptions{Topic: "mt", Topics: 3, QoS: 1, Size: 64, Count: 5, Interval: 20 * time.Millisecond,
		LargeSize: 8192, LargeInterval: 40 * time.Millisecond, AckWait: 10 * time.Second,
		OnResult: func(r measure.Result) { res = append(res, r) }} // OnResult calls one at a time
	p, err := measure.NewMultiPublisher(o)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctx, url, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sum := p.Run(ctx, c)
	total := 3*5 + 3 // large at 3.3, 43.3, 83.3 ms (< 100 ms)
	if p.Messages() != total || sum.Sent != total || sum.Acked != total || sum.Failed != 0 || len(res) != total {
		t.Fatalf("summary %+v, %d results, %d messages; want %d", sum, len(res), p.Messages(), total)
	}
	slots := o.Schedule()
	seen := map[uint32]bool{}
	for _, r := range res {
		if seen[r.Seq] || int(r.Seq) >= len(slots) {
			t.Fatalf("result %+v: seq twice or out of the schedule", r)
		}
		seen[r.Seq] = true
		s := slots[r.Seq]
		wantSize := 64
		if s.Large {
			wantSize = 8192
		}
		if r.Topic != s.Topic || r.Size != wantSize || r.Err != nil || r.AcceptedNs < r.SendNs || r.SendNs < r.DueNs {
			t.Errorf("result %+v against slot %+v", r, s)
		}
	}
	deadline := time.Now().Add(testutil.Scale(5 * time.Second))
	for {
		mu.Lock()
		n := 0
		for _, v := range recv {
			n += v
		}
		done := n == total && recv["mt/0"] == 5 && recv["mt/2"] == 5 && recv["mt/large"] == 3
		snapshot := len(recv)
		mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("subscriber got %d messages on %d topics, want %d", n, snapshot, total)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
