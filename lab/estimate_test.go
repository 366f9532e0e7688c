package lab

import (
	"testing"
	"time"
)

// TestEstimateMatchesFinishedRuns holds the wall-time estimate to runs
// whose durations were recorded (done.json of every cell): smoke, 15 cells
// one at a time, ran 37 s (estimated 5 min before the calibration); e3a,
// 18 cells one at a time, 3 min 12 s (evidence/e3a-full/manifest.json).
func TestEstimateMatchesFinishedRuns(t *testing.T) {
	for _, c := range []struct {
		name   string
		ran    time.Duration
		lo, hi time.Duration
	}{
		{"smoke", 37 * time.Second, 25 * time.Second, 60 * time.Second},
		{"e3a", 192 * time.Second, 150 * time.Second, 240 * time.Second},
	} {
		specs, err := Resolve(c.name)
		if err != nil {
			t.Fatal(err)
		}
		cells, err := Cells(specs)
		if err != nil {
			t.Fatal(err)
		}
		if got := EstimateWall(cells, 1); got < c.lo || got > c.hi {
			t.Errorf("%s: estimated %s one at a time; it ran %s (want %s to %s)", c.name, got, c.ran, c.lo, c.hi)
		}
	}
}
