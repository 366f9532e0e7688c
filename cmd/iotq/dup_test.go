package main

import (
	"bufio"
	"io"
	"testing"
	"time"

	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/internal/payload"
)

// TestSubDuplicateKey: a copy of the same (run, seq) is a duplicate; the
// same seq from another run is not; payloads without a run id fall back to
// (topic, seq).
func TestSubDuplicateKey(t *testing.T) {
	s := &subscriber{out: bufio.NewWriter(io.Discard), quiet: true, seen: map[dupKey]bool{}, msgCh: make(chan struct{}, 1), full: make(chan struct{})}
	msg := func(size int, run uint64, seq uint32) client.Message {
		b, err := payload.Encode(payload.Header{Seq: seq, SendNs: time.Now().UnixNano(), RunID: run}, size)
		if err != nil {
			t.Fatal(err)
		}
		return client.Message{Topic: "t", Payload: b, Received: time.Now()}
	}
	for _, m := range []client.Message{
		msg(30, 1, 0), msg(30, 1, 1), // run 1
		msg(30, 2, 0), msg(30, 2, 1), // run 2 reuses seq: not duplicates
		msg(30, 1, 1),                // a real duplicate of run 1
		msg(16, 0, 5), msg(16, 0, 5), // no room for a run id: seq only
	} {
		s.handle(m)
	}
	if s.measured != 7 || s.duplicates != 2 || len(s.delays) != 5 {
		t.Fatalf("measured %d duplicates %d delays %d, want 7, 2, 5", s.measured, s.duplicates, len(s.delays))
	}
}
