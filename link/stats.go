package link

import (
	"errors"
	"fmt"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// DirStats are the counters of one direction of a link (or of one
// sender-receiver pair on a shared medium).
type DirStats struct {
	// Arrived counts packets that entered the direction (sent by the
	// near-end node), ArrivedBytes their IP bytes.
	Arrived      uint64 `json:"arrived"`
	ArrivedBytes uint64 `json:"arrived_bytes"`
	// Packets and Bytes count packets delivered (or scheduled for delivery)
	// to the far end.
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
	// Drops by cause.
	DropRandom  uint64 `json:"drop_random"`
	DropQueue   uint64 `json:"drop_queue"`
	DropRetries uint64 `json:"drop_retries"`
	DropDown    uint64 `json:"drop_down"`
	DropMTU     uint64 `json:"drop_mtu"`
	// DropNAT counts packets addressed to a port a rebinding NAT no longer
	// maps (Step.Rebind).
	DropNAT uint64 `json:"drop_nat,omitempty"`
	// Tries counts link-layer transmission attempts (shared medium only).
	Tries uint64 `json:"tries,omitempty"`
	// QueueLimit is the queue's limit in bytes (0: unlimited or packets only).
	QueueLimit int `json:"queue_limit"`
	// Queue describes the queue discipline and its limits as ParseQueue
	// reads them ("droptail,bytes=125000").
	Queue string `json:"queue,omitempty"`
	// QueueDelay summarises the time delivered packets waited in the queue.
	QueueDelay DelaySummary `json:"queue_delay"`
}

// Drops is the sum of the drops of every cause.
func (s DirStats) Drops() uint64 {
	return s.DropRandom + s.DropQueue + s.DropRetries + s.DropDown + s.DropMTU + s.DropNAT
}

// DelaySummary summarises a delay histogram (microsecond resolution,
// three significant digits).
type DelaySummary struct {
	N    int64         `json:"n"`
	Mean time.Duration `json:"mean_ns"`
	P50  time.Duration `json:"p50_ns"`
	P90  time.Duration `json:"p90_ns"`
	P99  time.Duration `json:"p99_ns"`
	P999 time.Duration `json:"p999_ns"`
	Max  time.Duration `json:"max_ns"`
	// Hist counts delays in power-of-two buckets: bucket i holds delays
	// below UpperUS microseconds (and at least the previous bucket's
	// bound). Empty buckets at the ends are left out.
	Hist []Bucket `json:"hist,omitempty"`
}

// Bucket is one bar of DelaySummary.Hist.
type Bucket struct {
	UpperUS int64 `json:"upper_us"`
	N       int64 `json:"n"`
}

// histogram records durations in microseconds. The HdrHistogram (about
// 190 KB) is allocated on the first record, so unused directions of a
// shared medium cost nothing.
type histogram struct{ h *hdrhistogram.Histogram }

// histMax is the largest queueing delay the histogram tracks (one hour).
const histMax = int64(time.Hour / time.Microsecond)

func newHistogram() *histogram { return &histogram{} }

func (h *histogram) record(d time.Duration) {
	if h.h == nil {
		h.h = hdrhistogram.New(1, histMax, 3)
	}
	us := int64(d / time.Microsecond)
	us = min(max(us, 0), histMax)
	_ = h.h.RecordValue(us) // in range by construction
}

func (h *histogram) summary() DelaySummary {
	if h.h == nil {
		return DelaySummary{}
	}
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	// Power-of-two buckets: [0,1), [1,2), [2,4), ... microseconds.
	var counts [64]int64
	for _, b := range h.h.Distribution() {
		if b.Count == 0 {
			continue
		}
		i := 0
		for v := b.From; v > 0; v >>= 1 {
			i++
		}
		counts[i] += b.Count
	}
	lo, hi := -1, -1
	for i, c := range counts {
		if c > 0 {
			if lo < 0 {
				lo = i
			}
			hi = i
		}
	}
	var hist []Bucket
	for i := max(lo, 0); lo >= 0 && i <= hi; i++ {
		hist = append(hist, Bucket{UpperUS: int64(1) << i, N: counts[i]})
	}
	return DelaySummary{
		Hist: hist,
		N:    h.h.TotalCount(),
		Mean: time.Duration(h.h.Mean() * float64(time.Microsecond)),
		P50:  us(h.h.ValueAtQuantile(50)),
		P90:  us(h.h.ValueAtQuantile(90)),
		P99:  us(h.h.ValueAtQuantile(99)),
		P999: us(h.h.ValueAtQuantile(99.9)),
		Max:  us(h.h.Max()),
	}
}

// errorf and joinErrors keep model.go free of fmt/errors imports noise.
func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

func joinErrors(errs []error) error { return errors.Join(errs...) }
