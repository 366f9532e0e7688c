package coapfront

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"
)

// BenchmarkObserverMemory registers b.N observations (one UDP client,
// distinct tokens, distinct topics) and reports the heap growth per
// observation (front and message layer, after GC; the deduplication cache
// entry of each registration request is included).
//
//	go test -run '^$' -bench ObserverMemory -benchtime 5000x ./broker/coapfront/
func BenchmarkObserverMemory(b *testing.B) {
	topics := &memTopics{}
	_, c := startFrontTB(b, topics)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := c.do(req(codes.GET, fmt.Sprintf("t/mem/%d", i), uintOpt(message.Observe, 0)))
		if r.Code != codes.Content {
			b.Fatalf("register %d: %v", i, r.Code)
		}
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N), "B/observer")
}
