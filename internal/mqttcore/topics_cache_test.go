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

// A cached answer is handed out as it is, without an allocation, and its
// List holds the same subscriptions as its map (patch 44); an answer with
// shared subscriptions is the caller's own.
func TestSubscribersCachedAnswerIsSharedAndListed(t *testing.T) {
	x := NewTopicsIndex()
	x.Subscribe("c1", packets.Subscription{Filter: "t/+", Qos: 1})
	x.Subscribe("c2", packets.Subscription{Filter: "t/#"})
	x.Subscribe("c1", packets.Subscription{Filter: "t/a", Qos: 0, Identifier: 3})
	first := x.Subscribers("t/a")
	if second := x.Subscribers("t/a"); second != first {
		t.Fatal("the second answer for an unchanged topic is not the cached one")
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = x.Subscribers("t/a") }); allocs != 0 {
		t.Fatalf("a cached answer allocated %.0f times, want 0", allocs)
	}
	l := first.List()
	if len(l) != len(first.Subscriptions) || len(l) != 2 {
		t.Fatalf("List has %d entries, the map %d (want 2)", len(l), len(first.Subscriptions))
	}
	for _, cs := range l {
		if want := first.Subscriptions[cs.ClientID]; cs.Subscription.Qos != want.Qos || cs.Subscription.Filter != want.Filter || len(cs.Subscription.Identifiers) != len(want.Identifiers) {
			t.Fatalf("List's %s: %+v, the map's %+v", cs.ClientID, cs.Subscription, want)
		}
	}
	if c1 := first.Subscriptions["c1"]; c1.Qos != 1 || c1.Identifiers["t/a"] != 3 {
		t.Fatalf("c1's merged subscription: %+v, want QoS 1 and identifier 3", c1)
	}
	x.Subscribe("c3", packets.Subscription{Filter: "$share/g/t/a"})
	a, b := x.Subscribers("t/a"), x.Subscribers("t/a")
	if a == b {
		t.Fatal("an answer with shared subscriptions is shared between callers")
	}
	if len(a.List()) != 2 {
		t.Fatalf("List of an uncached answer: %d entries, want 2", len(a.List()))
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
