package trace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Trace is a packet-delivery trace: delivery opportunities of one
// MTU-sized packet each, at Times after the trace's start, repeating every
// Period.
type Trace struct {
	// Name says where the trace came from (a built-in name or a file).
	Name string
	// Times of the opportunities, whole milliseconds, never decreasing.
	Times []time.Duration
	// Period is the last opportunity's time: the trace repeats after it.
	Period time.Duration
}

// MaxLines bounds a trace file: 10 million opportunities (two hours at
// 20 Mbit/s) is far more than any experiment replays.
const MaxLines = 10_000_000

// Parse reads a trace in Mahimahi's format. name labels the errors (the
// file name), which give the line and say what to write instead. Blank
// lines are refused (Mahimahi refuses them too), so is a trace whose last
// time is 0 (it would have no period).
func Parse(name string, r io.Reader) (*Trace, error) {
	t := &Trace{Name: name}
	sc := bufio.NewScanner(r)
	line := 0
	var last int64
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" {
			return nil, fmt.Errorf("%s:%d: empty line: every line is one delivery opportunity, a time in whole milliseconds", name, line)
		}
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil || ms < 0 {
			return nil, fmt.Errorf("%s:%d: %q is not a time in whole milliseconds (a non-negative integer, one per line)", name, line, s)
		}
		if ms < last {
			return nil, fmt.Errorf("%s:%d: %d ms comes after %d ms: the times must not decrease", name, line, ms, last)
		}
		if ms > int64(24*time.Hour/time.Millisecond) {
			return nil, fmt.Errorf("%s:%d: %d ms is more than a day: is this a Mahimahi packet-delivery trace (milliseconds, not microseconds)?", name, line, ms)
		}
		if line > MaxLines {
			return nil, fmt.Errorf("%s: more than %d lines", name, MaxLines)
		}
		last = ms
		t.Times = append(t.Times, time.Duration(ms)*time.Millisecond)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: read trace: %w", name, err)
	}
	if len(t.Times) == 0 {
		return nil, fmt.Errorf("%s: no delivery opportunity: a trace has one time in milliseconds per line", name)
	}
	if last == 0 {
		return nil, fmt.Errorf("%s: the last time is 0 ms: the trace repeats with its last time as the period, so it must be positive", name)
	}
	t.Period = t.Times[len(t.Times)-1]
	return t, nil
}

// Load reads a trace file.
func Load(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	defer f.Close()
	return Parse(path, f)
}

// Resolve returns the built-in trace called s, or else the trace in the
// file s.
func Resolve(s string) (*Trace, error) {
	if t, err := ByName(s); err == nil {
		return t, nil
	}
	if _, err := os.Stat(s); errors.Is(err, os.ErrNotExist) && !strings.ContainsAny(s, "/.") {
		return nil, fmt.Errorf("trace %q: neither a built-in trace (%s) nor a file", s, strings.Join(Names(), ", "))
	}
	return Load(filepath.Clean(s))
}

// Write writes t in Mahimahi's format.
func (t *Trace) Write(w io.Writer) error {
	var b bytes.Buffer
	for _, at := range t.Times {
		b.WriteString(strconv.FormatInt(int64(at/time.Millisecond), 10))
		b.WriteByte('\n')
	}
	_, err := w.Write(b.Bytes())
	return err
}

// MeanRate is the trace's average rate in bit/s when every opportunity
// carries mtu bytes.
func (t *Trace) MeanRate(mtu int) int64 {
	if t.Period <= 0 {
		return 0
	}
	return int64(float64(len(t.Times)) * float64(mtu) * 8 / t.Period.Seconds())
}

// At returns the time of opportunity i (counted from 0 over the repeats
// of the trace), relative to the trace's start.
func (t *Trace) At(i int) time.Duration {
	n := len(t.Times)
	return time.Duration(i/n)*t.Period + t.Times[i%n]
}

// Next returns the index of the first opportunity at or after d.
func (t *Trace) Next(d time.Duration) int {
	n := len(t.Times)
	if d <= 0 {
		return 0
	}
	// rel in (0, Period]: an opportunity at the period's end (the last
	// line) comes before the next repeat's first one
	loops := int((d - 1) / t.Period)
	rel := d - time.Duration(loops)*t.Period
	return loops*n + sort.Search(n, func(k int) bool { return t.Times[k] >= rel })
}

// Validate reports what makes t unusable.
func (t *Trace) Validate() error {
	if t == nil || len(t.Times) == 0 {
		return fmt.Errorf("trace: no delivery opportunity")
	}
	if t.Period <= 0 || t.Period != t.Times[len(t.Times)-1] {
		return fmt.Errorf("trace %s: period %v must be the last time %v and positive", t.Name, t.Period, t.Times[len(t.Times)-1])
	}
	for i := 1; i < len(t.Times); i++ {
		if t.Times[i] < t.Times[i-1] || t.Times[i]%time.Millisecond != 0 {
			return fmt.Errorf("trace %s: opportunity %d at %v: times are whole milliseconds and never decrease", t.Name, i, t.Times[i])
		}
	}
	return nil
}
