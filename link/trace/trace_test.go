package trace

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseMahimahiTrace(t *testing.T) {
	tr, err := Parse("t", strings.NewReader("1\n1\n3\n5\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Times) != 4 || tr.Period != 5*time.Millisecond || tr.Times[1] != time.Millisecond {
		t.Fatalf("%+v", tr)
	}
	// 4 opportunities of 1500 B in 5 ms: 9.6 Mbit/s
	if got := tr.MeanRate(1500); got != 9_600_000 {
		t.Errorf("mean rate %d", got)
	}
	// opportunities over the repeats: 1 1 3 5 | 6 6 8 10 | ...
	for i, want := range []int{1, 1, 3, 5, 6, 6, 8, 10, 11} {
		if got := tr.At(i); got != time.Duration(want)*time.Millisecond {
			t.Errorf("At(%d) = %v, want %d ms", i, got, want)
		}
	}
	for _, c := range []struct {
		at   time.Duration
		want int
	}{{0, 0}, {time.Millisecond, 0}, {1500 * time.Microsecond, 2}, {5 * time.Millisecond, 3}, {5*time.Millisecond + 1, 4}, {10 * time.Millisecond, 7}, {10500 * time.Microsecond, 8}} {
		if got := tr.Next(c.at); got != c.want {
			t.Errorf("Next(%v) = %d, want %d", c.at, got, c.want)
		}
	}
	var b bytes.Buffer
	if err := tr.Write(&b); err != nil || b.String() != "1\n1\n3\n5\n" {
		t.Errorf("written back as %q, %v", b.String(), err)
	}
}

func TestParseErrorsNameTheLine(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"", "no delivery opportunity"},
		{"1\n\n2\n", "t:2: empty line"},
		{"1\n2.5\n", `t:2: "2.5" is not a time in whole milliseconds`},
		{"1\n-3\n", `t:2: "-3" is not a time`},
		{"5\n4\n", "t:2: 4 ms comes after 5 ms"},
		{"0\n0\n", "the last time is 0 ms"},
		{"1\n999999999999\n", "more than a day"},
	} {
		_, err := Parse("t", strings.NewReader(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.src, err, c.want)
		}
	}
	if _, err := Resolve("no-such-trace"); err == nil || !strings.Contains(err.Error(), "cellular-lte") {
		t.Errorf("unknown name: %v", err)
	}
	p := filepath.Join(t.TempDir(), "x.trace")
	os.WriteFile(p, []byte("3\n2\n"), 0o644)
	if _, err := Resolve(p); err == nil || !strings.Contains(err.Error(), p+":2:") {
		t.Errorf("bad file: %v", err)
	}
}

// TestShippedTracesMatchModels: every shipped trace is what its model
// generates, and data/README.md describes it; so the files can be
// regenerated and cannot drift from the stated model.
func TestShippedTracesMatchModels(t *testing.T) {
	readme := ReadmeHeader
	for _, m := range Models() {
		want, err := m.Generate()
		if err != nil {
			t.Fatal(err)
		}
		got, err := ByName(m.Name)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Times) != len(want.Times) || got.Period != want.Period {
			t.Fatalf("%s: shipped %d opportunities over %v, model gives %d over %v: run go generate ./link/trace", m.Name, len(got.Times), got.Period, len(want.Times), want.Period)
		}
		for i := range got.Times {
			if got.Times[i] != want.Times[i] {
				t.Fatalf("%s: line %d is %v, the model gives %v", m.Name, i+1, got.Times[i], want.Times[i])
			}
		}
		readme += Describe(m, got)
		// the model's median is near the trace's mean rate
		if r := got.MeanRate(m.MTU); r < m.MedianRate/2 || r > m.MedianRate*2 {
			t.Errorf("%s: mean rate %d far from the model's median %d", m.Name, r, m.MedianRate)
		}
	}
	b, err := os.ReadFile("data/README.md")
	if err != nil || string(b) != readme {
		t.Errorf("data/README.md is not what go generate writes (%v)", err)
	}
}

func TestModelOutagesAndSlots(t *testing.T) {
	m := Models()[0]
	m.Duration, m.OutageEvery, m.OutageMean = 20*time.Second, 2*time.Second, 500*time.Millisecond
	tr, err := m.Generate()
	if err != nil {
		t.Fatal(err)
	}
	s := tr.Summarize(m.MTU)
	if s.LongestGap < 100*time.Millisecond {
		t.Errorf("outages every 2 s for 0.5 s on average, yet the longest gap is %v", s.LongestGap)
	}
	if s.P95Rate <= s.P5Rate {
		t.Errorf("capacity does not vary: %+v", s)
	}
	if err := tr.Validate(); err != nil {
		t.Error(err)
	}
	bad := m
	bad.OutageMean = 0
	if _, err := bad.Generate(); err == nil {
		t.Error("outages without a length accepted")
	}
}
