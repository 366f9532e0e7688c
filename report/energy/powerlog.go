package energy

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Sample is one reading of an external power meter.
type Sample struct {
	TimeNs int64
	Watts  float64
}

// PowerLog is a time-ordered series of power readings.
type PowerLog []Sample

// ReadPowerLog reads a CSV file with two columns, timestamp and watts, and an
// optional header row. Timestamps may be Unix time as an integer in
// seconds, milliseconds, microseconds or nanoseconds (told apart by
// magnitude), as a decimal number of seconds, or RFC 3339 text.
func ReadPowerLog(path string) (PowerLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("power log: %w", err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	r.Comment = '#'
	var log PowerLog
	line := 0
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		line++
		if err != nil {
			return nil, fmt.Errorf("power log %s: %w", path, err)
		}
		if len(rec) < 2 {
			return nil, fmt.Errorf("power log %s line %d: want two columns timestamp,watts, got %d", path, line, len(rec))
		}
		ts, terr := ParseTimestamp(rec[0])
		w, werr := strconv.ParseFloat(strings.TrimSpace(rec[1]), 64)
		if terr != nil || werr != nil {
			if line == 1 {
				continue // header row
			}
			return nil, fmt.Errorf("power log %s line %d: want timestamp,watts (Unix time or RFC 3339, then a number): %q", path, line, strings.Join(rec, ","))
		}
		log = append(log, Sample{TimeNs: ts, Watts: w})
	}
	if len(log) == 0 {
		return nil, fmt.Errorf("power log %s: no readings", path)
	}
	slices.SortStableFunc(log, func(a, b Sample) int { return cmpInt(a.TimeNs, b.TimeNs) })
	return log, nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ParseTimestamp converts a timestamp of a power log to Unix nanoseconds.
func ParseTimestamp(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		a := i
		if a < 0 {
			a = -a
		}
		switch {
		case a >= 1e17:
			return i, nil
		case a >= 1e14:
			return i * 1e3, nil
		case a >= 1e11:
			return i * 1e6, nil
		default:
			return i * 1e9, nil
		}
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
		return int64(math.Round(f * 1e9)), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("timestamp %q: want Unix time or RFC 3339", s)
	}
	return t.UnixNano(), nil
}

// at interpolates the power at t linearly between the neighbouring samples.
func (l PowerLog) at(t int64) float64 {
	i, _ := slices.BinarySearchFunc(l, t, func(s Sample, t int64) int { return cmpInt(s.TimeNs, t) })
	switch {
	case i == 0:
		return l[0].Watts
	case i == len(l):
		return l[len(l)-1].Watts
	}
	a, b := l[i-1], l[i]
	if b.TimeNs == a.TimeNs {
		return b.Watts
	}
	return a.Watts + (b.Watts-a.Watts)*float64(t-a.TimeNs)/float64(b.TimeNs-a.TimeNs)
}

// Energy integrates the log over [startNs, endNs] with the trapezoid rule,
// interpolating linearly at the window's edges. ok is false when the window
// lies outside the log (no alignment possible).
func (l PowerLog) Energy(startNs, endNs int64) (joules, meanW float64, ok bool) {
	if len(l) == 0 || endNs <= startNs || endNs < l[0].TimeNs || startNs > l[len(l)-1].TimeNs {
		return 0, 0, false
	}
	startNs = max(startNs, l[0].TimeNs)
	endNs = min(endNs, l[len(l)-1].TimeNs)
	if endNs <= startNs {
		return 0, 0, false
	}
	pts := []Sample{{startNs, l.at(startNs)}}
	for _, s := range l {
		if s.TimeNs > startNs && s.TimeNs < endNs {
			pts = append(pts, s)
		}
	}
	pts = append(pts, Sample{endNs, l.at(endNs)})
	for i := 1; i < len(pts); i++ {
		dt := float64(pts[i].TimeNs-pts[i-1].TimeNs) / 1e9
		joules += dt * (pts[i].Watts + pts[i-1].Watts) / 2
	}
	return joules, joules / (float64(endNs-startNs) / 1e9), true
}
