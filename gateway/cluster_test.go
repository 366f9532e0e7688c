package gateway_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/gateway"
	iotqtest "github.com/iotq/iotq/internal/testutil"
)

// Sizes of the failover test's stream: bounded in count, paced so that the
// kill falls in the middle of it.
const (
	failoverPublishers = 2
	failoverMessages   = 150 // per publisher
	failoverWindow     = 8   // QoS 1 publishes in flight per publisher
	failoverPace       = 5 * time.Millisecond
)

// ackLog records, per publisher, which sequence numbers the broker
// acknowledged, and when the first PUBACK after a moment arrived.
type ackLog struct {
	mu       sync.Mutex
	acked    map[string]bool // "pub/seq"
	count    int
	firstAck map[string]time.Time // per publisher: first PUBACK on a connection made after killedAt
	killedAt time.Time
	conns    map[string]int // per publisher: connections used
	// back: per publisher, when its first connection made after killedAt
	// was accepted (CONNACK through a survivor).
	back map[string]time.Time
}

// ack records an acknowledged message; dialed is when its connection was
// made (only a connection made after the kill counts for recovery).
func (a *ackLog) ack(pub string, seq int, at, dialed time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := pub + "/" + strconv.Itoa(seq)
	if !a.acked[k] {
		a.acked[k] = true
		a.count++
	}
	if !a.killedAt.IsZero() && dialed.After(a.killedAt) && a.firstAck[pub].IsZero() {
		a.firstAck[pub] = at
	}
}

func (a *ackLog) acks() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.count
}

// TestClusterFailover: the gateway (QUIC in front, client_hash balancing)
// over the MQTT listeners of a three-node NATS cluster with JetStream.
// Two QUIC publishers stream QoS 1 messages through the gateway and a
// subscriber with a persistent session receives them; mid-stream the node
// the clients are on is killed (SIGKILL). Every client dials the gateway
// again, which skips the dead node and connects it to a survivor; the
// publishers send again what was not acknowledged. Asserted: every
// acknowledged message reaches the subscriber (0 lost), the clients end up
// on survivors, recovery within a generous bound; the time to recover is
// logged.
func TestClusterFailover(t *testing.T) {
	nc := iotqtest.StartNATSCluster(t, 3)
	g, err := gateway.New(gateway.Options{
		Routes: []gateway.Route{{
			Listen:    "quic://127.0.0.1:0",
			Upstreams: nc.MQTTUpstreams(),
			ALPN:      []string{"mqtt"},
			Balance:   gateway.BalanceClientHash,
		}},
		StateDir:    t.TempDir(),
		DialTimeout: 2 * time.Second,
		Logger:      iotqtest.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	gw := g.Endpoints()[0]
	ctx, cancel := context.WithTimeout(context.Background(), iotqtest.Scale(3*time.Minute))
	defer cancel()
	dir := t.TempDir()
	opts := func(id string, persistent bool) client.Options {
		return client.Options{
			ClientID: id, PersistentSession: persistent, CAFile: g.CAFile(),
			// A ticket per client: a reconnect resumes with 0-RTT.
			SessionCacheFile: filepath.Join(dir, id+".tickets"),
			ConnectTimeout:   10 * time.Second, AckTimeout: 20 * time.Second,
			Logger: iotqtest.Logger(t),
		}
	}
	// dial connects through the gateway, retrying while the cluster
	// recovers; it returns nil once ctx ends.
	dial := func(id string, persistent bool) client.Client {
		wait := 50 * time.Millisecond
		for ctx.Err() == nil {
			c, err := client.Dial(ctx, gw, opts(id, persistent))
			if err == nil {
				return c
			}
			t.Logf("%s: dial through the gateway: %v (again in %v)", id, err, wait)
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
			wait = min(2*wait, time.Second)
		}
		return nil
	}

	// The subscriber: persistent session, QoS 1, resubscribes after every
	// reconnect (its queued messages wait in the client until then).
	var (
		recvMu   sync.Mutex
		received = map[string]int{}
		subConns int
		subBack  time.Time // first message received on a connection made after the kill
	)
	acks := &ackLog{acked: map[string]bool{}, firstAck: map[string]time.Time{}, conns: map[string]int{}, back: map[string]time.Time{}}
	const subID = "failover-sub"
	subscribe := func() client.Client {
		c := dial(subID, true)
		if c == nil {
			return nil
		}
		recvMu.Lock()
		subConns++
		recvMu.Unlock()
		dialed := time.Now()
		err := c.Subscribe(ctx, "fleet/#", client.SubscribeOptions{QoS: 1}, func(m client.Message) {
			recvMu.Lock()
			defer recvMu.Unlock()
			received[string(m.Payload)]++
			acks.mu.Lock()
			k := acks.killedAt
			acks.mu.Unlock()
			if !k.IsZero() && dialed.After(k) && subBack.IsZero() {
				subBack = m.Received
			}
		})
		if err != nil {
			t.Logf("subscribe: %v", err)
			_ = c.Close()
			return nil
		}
		return c
	}
	sub := subscribe()
	if sub == nil {
		t.Fatal("subscriber could not connect through the gateway")
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // keeps the subscriber connected until ctx ends
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				_ = sub.Close()
				return
			case <-sub.Done():
				t.Logf("subscriber: connection lost: %v", sub.Err())
				_ = sub.Close()
				for sub = subscribe(); sub == nil && ctx.Err() == nil; sub = subscribe() {
				}
				if sub == nil {
					return
				}
			}
		}
	}()
	defer func() { cancel(); wg.Wait() }()

	// The publishers.
	pubDone := make(chan error, failoverPublishers)
	for p := range failoverPublishers {
		id := fmt.Sprintf("failover-pub%d", p)
		go func() { pubDone <- publishStream(ctx, id, dial, acks) }()
	}

	// The kill: the node the clients are on (client_hash maps every
	// loopback client to the same node), once a third of the stream is
	// acknowledged.
	total := failoverPublishers * failoverMessages
	iotqtest.Eventually(t, 60*time.Second, func() error {
		if n := acks.acks(); n < total/3 {
			return fmt.Errorf("%d of %d acknowledged before the kill", n, total)
		}
		return nil
	})
	var victim *iotqtest.NATSNode
	for _, n := range nc.Nodes {
		if c, err := n.Connections(); err == nil && c >= failoverPublishers+1 {
			victim = n
		}
	}
	if victim == nil {
		t.Fatal("no node holds the test's clients")
	}
	// What the victim led decides how long the survivors take (a new
	// leader for a stream the sessions need is elected first).
	var led []string
	for name, l := range nc.Leaders() {
		if l == victim.Name {
			led = append(led, name)
		}
	}
	slices.Sort(led)
	acks.mu.Lock()
	acks.killedAt = time.Now()
	ackedBefore := acks.count
	acks.mu.Unlock()
	victim.Kill()
	t.Logf("killed %s (pid %d; leader of %v) after %d of %d messages were acknowledged", victim.Name, victim.PID, led, ackedBefore, total)

	for range failoverPublishers {
		select {
		case err := <-pubDone:
			if err != nil {
				t.Fatal(err)
			}
		case <-ctx.Done():
			t.Fatalf("publishers did not finish: %d of %d acknowledged", acks.acks(), total)
		}
	}

	// 0 acknowledged messages lost: every acknowledged message reaches the
	// subscriber (NATS resends unacknowledged deliveries after its
	// ack_wait).
	missing := func() []string {
		acks.mu.Lock()
		defer acks.mu.Unlock()
		recvMu.Lock()
		defer recvMu.Unlock()
		var out []string
		for k := range acks.acked {
			if received[k] == 0 {
				out = append(out, k)
			}
		}
		return out
	}
	iotqtest.Eventually(t, 90*time.Second, func() error {
		if m := missing(); len(m) > 0 {
			return fmt.Errorf("%d acknowledged messages not delivered, e.g. %v", len(m), m[:min(len(m), 5)])
		}
		return nil
	})

	acks.mu.Lock()
	killedAt := acks.killedAt
	var worst time.Duration
	for p := range failoverPublishers {
		id := fmt.Sprintf("failover-pub%d", p)
		at := acks.firstAck[id]
		if at.IsZero() {
			t.Errorf("%s: no PUBACK after the kill", id)
			continue
		}
		d := at.Sub(killedAt)
		worst = max(worst, d)
		t.Logf("%s: CONNACK through a survivor %v, first PUBACK %v after the kill (%d connections)", id, acks.back[id].Sub(killedAt).Round(time.Millisecond), d.Round(time.Millisecond), acks.conns[id])
	}
	ackedTotal := acks.count
	acks.mu.Unlock()
	recvMu.Lock()
	dups := 0
	for _, n := range received {
		dups += n - 1
	}
	subRecovery := subBack.Sub(killedAt)
	conns := subConns
	recvMu.Unlock()
	if subBack.IsZero() {
		t.Errorf("subscriber: no message on a connection made after the kill (%d connections)", conns)
	} else {
		t.Logf("subscriber: first delivery on its new connection %v after the kill (%d connections)", subRecovery.Round(time.Millisecond), conns)
	}
	t.Logf("failover: %d of %d acknowledged, 0 lost, %d duplicate deliveries; publishers recovered in %v (worst)", ackedTotal, total, dups, worst.Round(time.Millisecond))
	if limit := iotqtest.Scale(60 * time.Second); worst > limit || subRecovery > limit {
		t.Errorf("recovery took %v (publishers) / %v (subscriber); want under %v", worst, subRecovery, limit)
	}

	// The clients are back through the gateway on the survivors.
	iotqtest.Eventually(t, 10*time.Second, func() error {
		sum := 0
		for _, n := range nc.Nodes {
			if n == victim {
				continue
			}
			c, err := n.Connections()
			if err != nil {
				return err
			}
			sum += c
		}
		if sum < 1 { // the subscriber (publishers closed when done)
			return fmt.Errorf("no client connection on the survivors")
		}
		return nil
	})
}

// publishStream publishes failoverMessages QoS 1 messages ("ID/SEQ" on
// fleet/ID) through the gateway with up to failoverWindow in flight. A
// message whose PUBACK did not arrive before its connection was lost is
// published again on the next connection (QoS 1: at least once).
func publishStream(ctx context.Context, id string, dial func(string, bool) client.Client, acks *ackLog) error {
	todo := make([]int, failoverMessages)
	for i := range todo {
		todo[i] = i
	}
	type inflight struct {
		seq int
		r   *client.Receipt
	}
	for len(todo) > 0 {
		dialed := time.Now()
		c := dial(id, false)
		if c == nil {
			return fmt.Errorf("%s: %d messages not acknowledged: %w", id, len(todo), ctx.Err())
		}
		acks.mu.Lock()
		acks.conns[id]++
		if !acks.killedAt.IsZero() && dialed.After(acks.killedAt) && acks.back[id].IsZero() {
			acks.back[id] = c.ConnectionInfo().Connack
		}
		acks.mu.Unlock()
		var window []inflight
		broken := false
		settle := func(f inflight) {
			err := f.r.Wait(ctx)
			if at, ok := f.r.Accepted(); ok && err == nil {
				acks.ack(id, f.seq, at, dialed)
				return
			}
			broken = true
			todo = append(todo, f.seq) // again on the next connection
		}
		for !broken && (len(todo) > 0 || len(window) > 0) {
			if len(todo) > 0 && len(window) < failoverWindow {
				seq := todo[0]
				r, err := c.Publish(ctx, "fleet/"+id, []byte(id+"/"+strconv.Itoa(seq)), client.PublishOptions{QoS: 1})
				if err != nil {
					broken = true
					break
				}
				todo = todo[1:]
				window = append(window, inflight{seq, r})
				time.Sleep(failoverPace)
				continue
			}
			settle(window[0])
			window = window[1:]
		}
		for _, f := range window { // their receipts complete when the connection ends
			settle(f)
		}
		_ = c.Close() // after a loss: the lost connection's error, known
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", id, ctx.Err())
		}
	}
	return nil
}
