package broker_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
)

// TestFanOutSharedEncoding: the copies of one PUBLISH for several
// subscribers share one encoding (fork patch 14); each copy must still
// carry its own subscriber's QoS and packet identifier. The QoS 1
// subscribers' identifiers are offset by one (an earlier message to only
// one of them), so bytes reused without the identifier patched would
// show.
func TestFanOutSharedEncoding(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{Listen: []string{"mqtt://127.0.0.1:0"}, StateDir: t.TempDir()})
	u := srv.Endpoints()[0]
	connect := func(id string) *rawClientT {
		rc, err := rawConnect(dial(t, srv, u), id)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rc.disconnect)
		return &rawClientT{rc, t}
	}
	s0, s1, s2, pub := connect("s0"), connect("s1"), connect("s2"), connect("pub")
	s0.sub("fan/t", 0)
	s1.sub("fan/t", 1)
	s2.sub("fan/pre", 1)
	s2.sub("fan/#", 1)
	s2.sub("fan/t", 1) // overlapping filters: one copy

	pub.rc.publish("fan/pre", 1, 1, []byte("pre"))
	const n = 30
	for i := range n {
		qos := byte(1)
		if i%5 == 4 {
			qos = 0
		}
		pub.rc.publish("fan/t", qos, uint16(i+2), []byte(fmt.Sprintf("m-%d-%s", i, strings.Repeat("x", i*7))))
	}
	if err := pub.rc.flush(); err != nil {
		t.Fatal(err)
	}

	s2.expect("fan/pre", 1, 1, "pre")
	next1, next2 := uint16(1), uint16(2)
	for i := range n {
		payload := fmt.Sprintf("m-%d-%s", i, strings.Repeat("x", i*7))
		s0.expect("fan/t", 0, 0, payload)
		if i%5 == 4 {
			s1.expect("fan/t", 0, 0, payload)
			s2.expect("fan/t", 0, 0, payload)
			continue
		}
		s1.expect("fan/t", 1, next1, payload)
		s2.expect("fan/t", 1, next2, payload)
		next1++
		next2++
	}
}

type rawClientT struct {
	rc *rawClient
	t  *testing.T
}

func (c *rawClientT) sub(filter string, qos byte) {
	c.t.Helper()
	if err := c.rc.subscribe(filter, qos); err != nil {
		c.t.Fatal(err)
	}
}

// expect reads the next PUBLISH (skipping other packets), checks it and
// acknowledges it.
func (c *rawClientT) expect(topic string, qos byte, id uint16, payload string) {
	c.t.Helper()
	_ = c.rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		typ, flags, body, err := c.rc.read()
		if err != nil {
			c.t.Fatalf("waiting for %q: %v", payload, err)
		}
		if typ != 3 {
			continue
		}
		gt, gq, gid, gp, err := parsePublish(flags, body)
		if err != nil {
			c.t.Fatal(err)
		}
		if gt != topic || gq != qos || gid != id || string(gp) != payload {
			c.t.Fatalf("got PUBLISH %s qos %d id %d %q, want %s qos %d id %d %q", gt, gq, gid, gp, topic, qos, id, payload)
		}
		if qos > 0 {
			c.rc.ack(id)
			if err := c.rc.flush(); err != nil {
				c.t.Fatal(err)
			}
		}
		return
	}
}
