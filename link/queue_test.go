package link

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// The queue stage and the Dir pipeline take their times as arguments, so
// these tests run on a virtual clock (no root, no sleeping); sim plays the
// forwarding thread's part. testing/synctest is not needed: nothing here
// reads a clock or starts a goroutine.

// sim drives d as the forwarding thread does: before each arrival it calls
// Serve at every wake time due (late after it), then offers the packet; at
// the end it serves until nothing waits. It returns each packet's event,
// indexed like at, and fails if a packet got none or two.
func sim(t *testing.T, d *Dir, at []time.Duration, size int, late time.Duration) []Event {
	t.Helper()
	out := make([]Event, len(at))
	seen := make([]int, len(at))
	record := func(evs []Event) {
		for _, e := range evs {
			i := e.Ref.(int)
			out[i] = e
			seen[i]++
		}
	}
	serveUntil := func(limit time.Duration, all bool) {
		for {
			w, ok := d.Wake()
			if !ok || (!all && w+late > limit) {
				return
			}
			record(d.Serve(w + late))
		}
	}
	for i, now := range at {
		serveUntil(now, false)
		record(d.Arrive(now, size, i))
	}
	serveUntil(0, true)
	for i, n := range seen {
		if n != 1 {
			t.Fatalf("packet %d got %d events, want 1", i, n)
		}
	}
	return out
}

func TestParseQueue(t *testing.T) {
	for _, c := range []struct {
		in   string
		want QueueSpec
		str  string
	}{
		{"droptail", QueueSpec{Name: "droptail"}, "droptail,1BDP"},
		{"droptail,bytes=30000", QueueSpec{Name: "droptail", Bytes: 30000}, "droptail,bytes=30000"},
		{" DropHead , packets=100 ", QueueSpec{Name: "drophead", Packets: 100}, "drophead,packets=100"},
		{"drophead,bytes=64kb,packets=10", QueueSpec{Name: "drophead", Bytes: 65536, Packets: 10}, "drophead,bytes=65536,packets=10"},
		{"30000", QueueSpec{Bytes: 30000}, "droptail,bytes=30000"},
		{"64kb", QueueSpec{Bytes: 65536}, "droptail,bytes=65536"},
	} {
		got, err := ParseQueue(c.in)
		if err != nil {
			t.Errorf("ParseQueue(%q): %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("ParseQueue(%q) = %+v, want %+v", c.in, got, c.want)
		}
		if got.String() != c.str {
			t.Errorf("ParseQueue(%q).String() = %q, want %q", c.in, got.String(), c.str)
		}
		if back, err := ParseQueue(strings.TrimSuffix(got.String(), ",1BDP")); err != nil || back.Bytes != got.Bytes || back.Packets != got.Packets || back.name() != got.name() {
			t.Errorf("%q does not read back: %+v, %v", got.String(), back, err)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"", "queue is empty"},
		{"codel", `unknown discipline "codel": use one of drophead, droptail`},
		{"droptail,limit=5", `unknown argument "limit": use bytes= or packets=`},
		{"droptail,bytes", "write it as bytes=SIZE or packets=N"},
		{"droptail,bytes=lots", `size "lots" is not understood`},
		{"drophead,packets=-1", `packets "-1" is not a count`},
		{"12q", `size "12q" is not understood`},
	} {
		_, err := ParseQueue(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseQueue(%q) error %v, want one containing %q", c.in, err, c.want)
		}
	}
	if err := (Params{Queue: QueueSpec{Name: "red"}}).Validate("links[0].a_to_b"); err == nil || !strings.Contains(err.Error(), `links[0].a_to_b: queue discipline "red" is unknown`) {
		t.Errorf("Validate of an unknown discipline: %v", err)
	}
}

func TestEveryRegisteredQueueIsFIFOUntilFull(t *testing.T) {
	for _, name := range QueueNames() {
		q, err := NewQueue(QueueSpec{Name: name}, QueueLimits{Packets: 3})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(q.String(), name) {
			t.Errorf("%s: String() = %q", name, q.String())
		}
		for i := range 3 {
			if dropped := q.Enqueue(Packet{Size: 100 + i, Ref: i}); dropped != nil {
				t.Fatalf("%s: dropped %v below the limit", name, dropped)
			}
		}
		if q.Len() != 3 || q.Bytes() != 303 {
			t.Errorf("%s: Len %d Bytes %d, want 3 and 303", name, q.Len(), q.Bytes())
		}
		for i := range 3 {
			p, ok := q.Dequeue(0)
			if !ok || p.Ref != i {
				t.Fatalf("%s: dequeue %d got %+v %v", name, i, p, ok)
			}
		}
		if _, ok := q.Dequeue(0); ok || q.Len() != 0 || q.Bytes() != 0 {
			t.Errorf("%s: not empty after dequeuing everything", name)
		}
	}
}

func TestDropTailAndDropHeadLimits(t *testing.T) {
	refs := func(ps []Packet) []any {
		var out []any
		for _, p := range ps {
			out = append(out, p.Ref)
		}
		return out
	}
	// Bytes: 250 fits 2 packets of 100; the third does not.
	tail, _ := NewQueue(QueueSpec{Name: "droptail"}, QueueLimits{Bytes: 250})
	head, _ := NewQueue(QueueSpec{Name: "drophead"}, QueueLimits{Bytes: 250})
	for i := range 4 {
		dt := refs(tail.Enqueue(Packet{Size: 100, Ref: i}))
		dh := refs(head.Enqueue(Packet{Size: 100, Ref: i}))
		var wantT, wantH []any
		if i >= 2 {
			wantT, wantH = []any{i}, []any{i - 2}
		}
		if !reflect.DeepEqual(dt, wantT) || !reflect.DeepEqual(dh, wantH) {
			t.Fatalf("packet %d: droptail dropped %v (want %v), drophead %v (want %v)", i, dt, wantT, dh, wantH)
		}
	}
	if p, _ := head.Dequeue(0); p.Ref != 2 {
		t.Errorf("drophead kept %v first, want 2", p.Ref)
	}
	// A big packet makes drop-head drop several small ones; one larger
	// than the whole limit is dropped itself.
	head, _ = NewQueue(QueueSpec{Name: "drophead"}, QueueLimits{Bytes: 300})
	for i := range 3 {
		head.Enqueue(Packet{Size: 100, Ref: i})
	}
	if got := refs(head.Enqueue(Packet{Size: 250, Ref: 3})); !reflect.DeepEqual(got, []any{0, 1, 2}) {
		t.Errorf("drophead for a 250-byte packet dropped %v, want [0 1 2]", got)
	}
	if got := refs(head.Enqueue(Packet{Size: 301, Ref: 4})); !reflect.DeepEqual(got, []any{4}) || head.Len() != 1 {
		t.Errorf("drophead of a packet above the limit dropped %v (len %d), want [4]", got, head.Len())
	}
	// Packets: the limit counts packets whatever their size.
	tail, _ = NewQueue(QueueSpec{Name: "droptail"}, QueueLimits{Packets: 2})
	tail.Enqueue(Packet{Size: 1500, Ref: 0})
	tail.Enqueue(Packet{Size: 1500, Ref: 1})
	if got := refs(tail.Enqueue(Packet{Size: 40, Ref: 2})); !reflect.DeepEqual(got, []any{2}) {
		t.Errorf("droptail,packets=2 dropped %v, want [2]", got)
	}
}

// TestBurstThroughDropTailAndDropHead sends a burst of 10 packets into a
// link whose queue holds 3, the packet being serialized included: the
// first goes straight to the serializer; drop-tail keeps the next two,
// drop-head the last two.
func TestBurstThroughDropTailAndDropHead(t *testing.T) {
	const rate, size = 1_000_000, 125 // 1 ms per packet
	at := make([]time.Duration, 10)   // all at t=0
	for _, c := range []struct {
		queue     string
		delivered []int
	}{
		{"droptail,packets=3", []int{0, 1, 2}},
		{"drophead,packets=3", []int{0, 8, 9}},
	} {
		spec, err := ParseQueue(c.queue)
		if err != nil {
			t.Fatal(err)
		}
		d := NewDir(Params{Rate: rate, Delay: 5 * time.Millisecond, Queue: spec}, 0, 0, 1)
		evs := sim(t, d, at, size, 0)
		var got []int
		for i, e := range evs {
			if e.Drop == CauseNone {
				got = append(got, i)
			} else if e.Drop != CauseQueue {
				t.Errorf("%s: packet %d dropped for %v", c.queue, i, e.Drop)
			}
		}
		if !reflect.DeepEqual(got, c.delivered) {
			t.Errorf("%s: delivered %v, want %v", c.queue, got, c.delivered)
		}
		// Back to back at the rate: the k-th delivered packet leaves at
		// (k+1) ms of serialization plus 5 ms of delay.
		for k, i := range got {
			want := time.Duration(k+1)*time.Millisecond + 5*time.Millisecond
			if evs[i].Depart != want || evs[i].Wait != time.Duration(k)*time.Millisecond {
				t.Errorf("%s: packet %d departs %v after waiting %v, want %v after %v", c.queue, i, evs[i].Depart, evs[i].Wait, want, time.Duration(k)*time.Millisecond)
			}
		}
		s := d.Stats()
		if s.Arrived != 10 || s.Packets != 3 || s.DropQueue != 7 {
			t.Errorf("%s: stats arrived %d delivered %d queue drops %d, want 10, 3, 7", c.queue, s.Arrived, s.Packets, s.DropQueue)
		}
	}
}

// TestLateServeChangesNoDecision: the forwarding thread may wake late (or
// never, until the next arrival); the model's decisions and times must
// not depend on it.
func TestLateServeChangesNoDecision(t *testing.T) {
	var at []time.Duration
	for i := range 3000 { // 1.5x the rate, in bursts
		at = append(at, time.Duration(i/3)*2*time.Millisecond)
	}
	for _, q := range []string{"droptail,bytes=20000", "drophead,packets=12"} {
		spec, _ := ParseQueue(q)
		p := Params{Rate: 10_000_000, Delay: 20 * time.Millisecond, Jitter: 2 * time.Millisecond, Loss: 0.01, Queue: spec}
		exact := sim(t, NewDir(p, 0, 0, 7), at, 1250, 0)
		for _, late := range []time.Duration{300 * time.Microsecond, 5 * time.Millisecond, time.Hour} {
			got := sim(t, NewDir(p, 0, 0, 7), at, 1250, late)
			if !reflect.DeepEqual(got, exact) {
				t.Errorf("%s: serving %v late changed the events", q, late)
			}
		}
		drops := 0
		for _, e := range exact {
			if e.Drop == CauseQueue {
				drops++
			}
		}
		if drops < 500 {
			t.Errorf("%s: only %d queue drops at 1.5x the rate", q, drops)
		}
	}
}

func TestScheduledRateChangeMovesTheDefaultQueueLimit(t *testing.T) {
	fast := int64(80_000_000)
	p := Params{Rate: 1_000_000, Schedule: []Step{{At: time.Second, Rate: &fast}}}
	d := NewDir(p, 100*time.Millisecond, 0, 1)
	if got := d.Stats().QueueLimit; got != MinQueueBytes {
		t.Fatalf("limit %d, want the floor %d", got, MinQueueBytes)
	}
	d.Arrive(time.Second, 100, nil)
	if got := d.Stats().QueueLimit; got != 1_000_000 {
		t.Errorf("limit after the step %d, want one BDP 1000000", got)
	}
	if got := d.Queue().String(); got != "droptail,bytes=1000000" {
		t.Errorf("queue %q", got)
	}
}

// eventTail is drop-tail hidden behind another type, so Dir takes the
// general event path (Wake/Serve) instead of its drop-tail shortcut.
type eventTail struct{ *dropTail }

// TestDropTailShortcutMatchesEventPath: Dir fixes a drop-tail packet's
// departure on arrival; the general path, serving the queue when the
// serializer is free, must make the same decisions at the same times.
func TestDropTailShortcutMatchesEventPath(t *testing.T) {
	var at []time.Duration
	for i := range 4000 { // bursts of 1-7 packets, 1.3x the rate on average
		at = append(at, time.Duration(i/4)*3*time.Millisecond+time.Duration(i%4)*time.Duration(i%7)*50*time.Microsecond)
	}
	for _, lim := range []QueueLimits{{Bytes: 20000}, {Packets: 9}, {Bytes: 12000, Packets: 20}} {
		rate := int64(10_000_000)
		p := Params{Rate: rate, Delay: 20 * time.Millisecond, Loss: 0.01,
			Queue: QueueSpec{Name: "droptail", Bytes: lim.Bytes, Packets: lim.Packets}}
		fast := NewDir(p, 0, 0, 5)
		if _, ok := fast.Queue().(*dropTail); !ok {
			t.Fatalf("droptail is %T", fast.Queue())
		}
		slow := NewDir(p, 0, 0, 5)
		slow.q = eventTail{slow.q.(*dropTail)}
		want := sim(t, slow, at, 1250, 0)
		got := sim(t, fast, at, 1250, 0)
		if !reflect.DeepEqual(got, want) {
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("limits %+v: packet %d: shortcut %+v, event path %+v", lim, i, got[i], want[i])
				}
			}
		}
		if s := fast.Stats(); s.DropQueue < 100 {
			t.Errorf("limits %+v: only %d queue drops", lim, s.DropQueue)
		}
	}
}
