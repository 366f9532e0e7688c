package mqttcore

import (
	"fmt"
	"sync"
	"testing"

	"github.com/iotq/iotq/internal/mqttcore/packets"
)

// The subscriber cache (patch 28) never answers with subscriptions older
// than the last change.
func TestSubscribersCacheFollowsChanges(t *testing.T) {
	x := NewTopicsIndex()
	if n := len(x.Subscribers("a/b").Subscriptions); n != 0 {
		t.Fatalf("empty index: %d subscribers", n)
	}
	x.Subscribe("c1", packets.Subscription{Filter: "a/+", Qos: 1})
	if s := x.Subscribers("a/b").Subscriptions; len(s) != 1 || s["c1"].Qos != 1 {
		t.Fatalf("after subscribing c1: %v", s)
	}
	x.Subscribe("c2", packets.Subscription{Filter: "a/#"})
	if s := x.Subscribers("a/b").Subscriptions; len(s) != 2 {
		t.Fatalf("after subscribing c2: %v", s)
	}
	x.Subscribe("c1", packets.Subscription{Filter: "a/+", Qos: 0})
	if s := x.Subscribers("a/b").Subscriptions; s["c1"].Qos != 0 {
		t.Fatalf("after c1 resubscribed at QoS 0: %v", s)
	}
	x.Unsubscribe("a/+", "c1")
	if s := x.Subscribers("a/b").Subscriptions; len(s) != 1 || s["c2"].Filter != "a/#" {
		t.Fatalf("after unsubscribing c1: %v", s)
	}
	got := 0
	x.InlineSubscribe(InlineSubscription{Subscription: packets.Subscription{Filter: "a/b", Identifier: 7}, Handler: func(*Client, packets.Subscription, packets.Packet) { got++ }})
	if n := len(x.Subscribers("a/b").InlineSubscriptions); n != 1 {
		t.Fatalf("after an inline subscription: %d inline subscribers", n)
	}
	x.InlineUnsubscribe(7, "a/b")
	if n := len(x.Subscribers("a/b").InlineSubscriptions); n != 0 {
		t.Fatalf("after the inline unsubscription: %d inline subscribers", n)
	}
	// Shared subscriptions are merged by callers, so never cached: a
	// caller's merge must not show up in the next answer.
	x.Subscribe("c3", packets.Subscription{Filter: "$share/g/a/b"})
	s := x.Subscribers("a/b")
	s.SelectShared()
	s.MergeSharedSelected()
	if n := len(x.Subscribers("a/b").Subscriptions); n != 1 {
		t.Fatalf("a caller's shared merge leaked into the index's answer: %d subscriptions", n)
	}
}

// A caller replacing the fields of its result does not change the cached
// answer of the next caller.
func TestSubscribersCacheResultIsPrivate(t *testing.T) {
	x := NewTopicsIndex()
	x.Subscribe("c1", packets.Subscription{Filter: "t"})
	first := x.Subscribers("t")
	first.Subscriptions = nil
	if n := len(x.Subscribers("t").Subscriptions); n != 1 {
		t.Fatalf("second answer has %d subscriptions after the first caller replaced its map", n)
	}
}

// The cache stays bounded when every message has a new topic.
func TestSubscribersCacheBounded(t *testing.T) {
	x := NewTopicsIndex()
	x.Subscribe("c1", packets.Subscription{Filter: "#"})
	for i := range 3 * maxCachedTopics {
		if n := len(x.Subscribers(fmt.Sprintf("dev/%d", i)).Subscriptions); n != 1 {
			t.Fatalf("topic %d: %d subscribers", i, n)
		}
	}
	x.cacheMu.RLock()
	defer x.cacheMu.RUnlock()
	if len(x.cache) > maxCachedTopics {
		t.Fatalf("cache holds %d topics, bound %d", len(x.cache), maxCachedTopics)
	}
}

// Concurrent lookups and changes (run with -race): every answer after a
// subscription returned includes it.
func TestSubscribersCacheConcurrent(t *testing.T) {
	x := NewTopicsIndex()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				id := fmt.Sprintf("w%d-%d", w, i)
				x.Subscribe(id, packets.Subscription{Filter: "s/+"})
				if _, ok := x.Subscribers("s/x").Subscriptions[id]; !ok {
					t.Errorf("%s subscribed but not in the answer", id)
					return
				}
				x.Unsubscribe("s/+", id)
				if _, ok := x.Subscribers("s/x").Subscriptions[id]; ok {
					t.Errorf("%s unsubscribed but still in the answer", id)
					return
				}
			}
		}()
	}
	wg.Wait()
}
