package broker_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	pahov3 "github.com/eclipse/paho.mqtt.golang"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/internal/testutil"
)

// TestHealthyQoS1SubscriberSmallQueueNotCutOff: with a small queue (64
// messages) and 1-KB messages, a QoS 1 subscriber that reads at full speed
// is never judged slow: a burst fills its queue faster than the queue is
// sampled, but the subscriber keeps making progress, so the publisher is
// held back instead (it used to be disconnected about 10 ms into the burst).
func TestHealthyQoS1SubscriberSmallQueueNotCutOff(t *testing.T) {
	for _, qos := range []byte{0, 1} {
		t.Run(fmt.Sprintf("QoS %d", qos), func(t *testing.T) {
			// The default max_stall (2 s), scaled for loaded machines: the
			// subscriber used to be cut off 10 ms into the burst, long
			// before any max_stall.
			srv := brokertest.Start(t, broker.Options{Flow: broker.FlowOptions{QueueLength: 64, MaxStall: testutil.Scale(broker.DefaultMaxStall)}, Metrics: "127.0.0.1:0"})
			u := brokertest.Endpoint(t, srv, "mqtt")
			const n = 5000
			got := make(chan string, 2*n)
			sub := v3Client(t, srv, u, "healthy", func(o *pahov3.ClientOptions) { o.SetCleanSession(false) })
			wait(t, sub.Subscribe("burst", qos, func(_ pahov3.Client, m pahov3.Message) { got <- string(m.Payload()[:5]) }), "subscribe")
			pub := v3Client(t, srv, u, "pub", func(o *pahov3.ClientOptions) { o.SetWriteTimeout(0) })
			payload := strings.Repeat("x", 1000)
			toks := make([]pahov3.Token, 0, n)
			for i := range n {
				toks = append(toks, pub.Publish("burst", qos, false, fmt.Sprintf("%05d%s", i, payload)))
			}
			for i, tok := range toks {
				if !tok.WaitTimeout(testutil.Scale(60*time.Second)) || tok.Error() != nil {
					t.Fatalf("publish %d: %v", i, tok.Error())
				}
			}
			seen := map[string]bool{}
			deadline := time.After(testutil.Scale(60 * time.Second))
			for len(seen) < n {
				select {
				case id := <-got:
					seen[id] = true
				case <-deadline:
					t.Fatalf("healthy subscriber got %d of %d messages; connected: %v\n%s", len(seen), n, sub.IsConnectionOpen(), droppedLines(scrape(t, srv)))
				}
			}
			m := scrape(t, srv)
			for _, line := range strings.Split(droppedLines(m), "\n") {
				if line != "" && !strings.HasSuffix(line, " 0") {
					t.Errorf("a healthy subscriber's messages were dropped: %s", line)
				}
			}
			if !sub.IsConnectionOpen() {
				t.Errorf("the healthy subscriber was disconnected")
			}
		})
	}
}

// droppedLines returns the messages_dropped_total and stalls_total samples.
func droppedLines(text string) string {
	var b strings.Builder
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "iotq_broker_messages_dropped_total{") || strings.HasPrefix(line, "iotq_broker_stalls_total ") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
