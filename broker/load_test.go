package broker_test

import (
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// loadSpec describes one bounded load run against a broker.
type loadSpec struct {
	dial     func() (net.Conn, error)
	fanout   bool          // false: point-to-point pairs; true: 1 publisher, pairs subscribers on one topic
	pairs    int           // pairs (point-to-point) or subscribers (fan-out)
	qos      byte          // publish and subscribe QoS (0 or 1)
	messages int           // published messages in total
	rate     float64       // total publish rate in msg/s; 0: as fast as possible
	size     int           // payload bytes (>= 16)
	idle     time.Duration // give up when nothing arrives for this long
}

type loadResult struct {
	published, expected, received int
	elapsed                       time.Duration // first publish to last receipt
	p50, p99                      time.Duration
}

func (r loadResult) lost() int { return r.expected - r.received }

func (r loadResult) rate() float64 { return float64(r.received) / r.elapsed.Seconds() }

func (r loadResult) String() string {
	return fmt.Sprintf("published %d, received %d of %d (lost %d, %.3f%%), %.0f msg/s delivered, p50 %v, p99 %v",
		r.published, r.received, r.expected, r.lost(), 100*float64(r.lost())/float64(max(1, r.expected)), r.rate(), r.p50, r.p99)
}

func runLoad(tb testing.TB, s loadSpec) loadResult {
	tb.Helper()
	if s.size < 16 {
		s.size = 16
	}
	if s.idle == 0 {
		s.idle = 3 * time.Second
	}
	nPub := s.pairs
	if s.fanout {
		nPub = 1
	}
	perPub := s.messages / nPub
	expectedPerSub := perPub
	if s.fanout {
		expectedPerSub = s.messages
	}
	topic := func(i int) string {
		if s.fanout {
			return "load/0"
		}
		return fmt.Sprintf("load/%d", i)
	}
	connect := func(id string) *rawClient {
		c, err := s.dial()
		if err != nil {
			tb.Fatalf("dial: %v", err)
		}
		rc, err := rawConnect(c, id)
		if err != nil {
			tb.Fatalf("%s: %v", id, err)
		}
		return rc
	}
	run := fmt.Sprintf("%d", time.Now().UnixNano())

	// Subscribers.
	var received atomic.Int64
	subs := make([]*rawClient, s.pairs)
	lat := make([][]int64, s.pairs)
	var subWG sync.WaitGroup
	var lastRecv atomic.Int64
	for i := range s.pairs {
		subs[i] = connect(fmt.Sprintf("lsub-%s-%d", run, i))
		if err := subs[i].subscribe(topic(i), s.qos); err != nil {
			tb.Fatal(err)
		}
		lat[i] = make([]int64, 0, expectedPerSub)
	}
	for i, rc := range subs {
		subWG.Add(1)
		go func() {
			defer subWG.Done()
			got := 0
			for got < expectedPerSub {
				typ, flags, body, err := rc.read()
				if err != nil {
					return
				}
				if typ != 3 {
					continue
				}
				_, qos, id, payload, err := parsePublish(flags, body)
				if err != nil || len(payload) < 16 {
					continue
				}
				now := time.Now().UnixNano()
				lat[i] = append(lat[i], now-int64(binary.BigEndian.Uint64(payload[8:])))
				got++
				received.Add(1)
				lastRecv.Store(now)
				if qos > 0 {
					rc.ack(id)
					if rc.r.Buffered() == 0 {
						_ = rc.flush()
					}
				}
			}
			_ = rc.flush()
		}()
	}

	// Publishers.
	pubs := make([]*rawClient, nPub)
	for i := range nPub {
		pubs[i] = connect(fmt.Sprintf("lpub-%s-%d", run, i))
	}
	var published atomic.Int64
	start := time.Now()
	var pubWG sync.WaitGroup
	for i, rc := range pubs {
		pubWG.Add(1)
		go func() {
			defer pubWG.Done()
			payload := make([]byte, s.size)
			var window chan struct{}
			var ackWG sync.WaitGroup
			if s.qos > 0 {
				window = make(chan struct{}, 100)
				ackWG.Add(1)
				go func() { // PUBACK reader
					defer ackWG.Done()
					for acked := 0; acked < perPub; {
						typ, _, _, err := rc.read()
						if err != nil {
							return
						}
						if typ == 4 {
							<-window
							acked++
						}
					}
				}()
			}
			rate := s.rate / float64(nPub)
			t := topic(i)
			for sent := 0; sent < perPub; {
				due := perPub
				if rate > 0 {
					due = min(perPub, int(time.Since(start).Seconds()*rate)+1)
				}
				batch := 0
				for sent < due && batch < 256 {
					binary.BigEndian.PutUint64(payload, uint64(sent))
					binary.BigEndian.PutUint64(payload[8:], uint64(time.Now().UnixNano()))
					id := uint16(sent%65535) + 1
					if window != nil {
						select {
						case window <- struct{}{}:
						default:
							_ = rc.flush()
							window <- struct{}{}
						}
					}
					rc.publish(t, s.qos, id, payload)
					sent++
					batch++
				}
				if err := rc.flush(); err != nil {
					return
				}
				published.Add(int64(batch))
				if rate > 0 && sent < perPub && sent >= due {
					time.Sleep(200 * time.Microsecond)
				}
			}
			ackWG.Wait()
		}()
	}
	pubWG.Wait()

	// Wait for delivery, bounded by the idle timeout.
	done := make(chan struct{})
	go func() { subWG.Wait(); close(done) }()
	last := received.Load()
	lastChange := time.Now()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-time.After(50 * time.Millisecond):
			if n := received.Load(); n != last {
				last, lastChange = n, time.Now()
			} else if time.Since(lastChange) > s.idle {
				break wait
			}
		}
	}
	for _, rc := range append(pubs, subs...) {
		rc.disconnect()
	}
	<-done
	res := loadResult{published: int(published.Load()), expected: expectedPerSub * s.pairs, received: int(received.Load())}
	if lr := lastRecv.Load(); lr > 0 {
		res.elapsed = time.Duration(lr - start.UnixNano())
	}
	var all []int64
	for _, l := range lat {
		all = append(all, l...)
	}
	if len(all) > 0 {
		slices.Sort(all)
		res.p50 = time.Duration(all[len(all)*50/100])
		res.p99 = time.Duration(all[min(len(all)-1, len(all)*99/100)])
	}
	return res
}
