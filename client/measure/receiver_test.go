package measure

import (
	"testing"
	"time"

	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/internal/payload"
)

// TestReceiverDuplicates: a copy of the same (run, seq) is a duplicate; the
// same seq from another run is not; payloads without a run id fall back to
// (topic, seq); ordinary messages are not observed.
func TestReceiverDuplicates(t *testing.T) {
	var r Receiver
	msg := func(topic string, size int, run uint64, seq uint32) client.Message {
		b, err := payload.Encode(payload.Header{Seq: seq, SendNs: time.Now().Add(-time.Millisecond).UnixNano(), RunID: run}, size)
		if err != nil {
			t.Fatal(err)
		}
		return client.Message{Topic: topic, Payload: b, Received: time.Now()}
	}
	var dups []bool
	for _, m := range []client.Message{
		msg("t", 30, 1, 0), msg("t", 30, 1, 1), // run 1
		msg("t", 30, 2, 0), msg("t", 30, 2, 1), // run 2 reuses seq: not duplicates
		msg("t", 30, 1, 1),                     // a real duplicate of run 1
		msg("u", 30, 1, 1),                     // another topic
		msg("t", 16, 0, 5), msg("t", 16, 0, 5), // no room for a run id: seq only
	} {
		o, ok := r.Observe(m)
		if !ok {
			t.Fatalf("measurement message not observed")
		}
		if o.DelayNs < int64(time.Millisecond) {
			t.Errorf("delay %d ns, want >= 1ms", o.DelayNs)
		}
		dups = append(dups, o.Duplicate)
	}
	if _, ok := r.Observe(client.Message{Topic: "t", Payload: []byte("hello")}); ok {
		t.Error("ordinary message observed")
	}
	want := []bool{false, false, false, false, true, false, false, true}
	for i := range want {
		if dups[i] != want[i] {
			t.Fatalf("duplicates %v, want %v", dups, want)
		}
	}
	if r.Measured() != 8 || r.Duplicates() != 2 || len(r.DelaysMs()) != 6 {
		t.Fatalf("measured %d duplicates %d delays %d, want 8, 2, 6", r.Measured(), r.Duplicates(), len(r.DelaysMs()))
	}
}
