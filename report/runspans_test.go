package report

import (
	"testing"
	"time"

	"github.com/iotq/iotq/records"
)

// TestRunSpans: recorded spans win; a resumed campaign from before they
// were recorded gets its runs back from the admission steps (each run
// begins with the idle calibration); otherwise start to end.
func TestRunSpans(t *testing.T) {
	at := func(minute int) time.Time {
		return time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC).Add(time.Duration(minute) * time.Minute)
	}
	step := func(minute int, reason string) records.AdmissionStep {
		return records.AdmissionStep{AtNs: at(minute).UnixNano(), Reason: reason}
	}
	resumed := records.Manifest{Start: at(0), End: at(200), EmulatorTiming: &records.EmulatorTiming{Runs: 2, Admission: []records.AdmissionStep{
		step(0, "idle calibration: p99 0.20 ms"), step(1, "lateness ..."), step(2, "lateness ..."),
		step(180, "idle calibration: p99 0.52 ms"), step(181, "lateness ..."),
	}}}
	for _, c := range []struct {
		name string
		m    records.Manifest
		want [][2]time.Time
	}{
		{"recorded", records.Manifest{Start: at(0), End: at(200), RunSpans: []records.RunSpan{{Start: at(0), End: at(3)}, {Start: at(180), End: at(200)}}},
			[][2]time.Time{{at(0), at(3)}, {at(180), at(200)}}},
		{"from the admission steps", resumed, [][2]time.Time{{at(0), at(2)}, {at(180), at(200)}}},
		{"one run", records.Manifest{Start: at(0), End: at(20)}, [][2]time.Time{{at(0), at(20)}}},
	} {
		got := runSpans(c.m)
		if len(got) != len(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
			continue
		}
		for i := range got {
			if !got[i][0].Equal(c.want[i][0]) || !got[i][1].Equal(c.want[i][1]) {
				t.Errorf("%s: %v, want %v", c.name, got, c.want)
			}
		}
	}
	// A campaign run between the two runs did not run beside it.
	if overlaps(runSpans(resumed), [][2]time.Time{{at(60), at(120)}}) {
		t.Error("a campaign between the two runs is taken as running beside it")
	}
}
