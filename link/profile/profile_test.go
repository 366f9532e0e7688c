package profile

import (
	"testing"
	"time"
)

func TestTableAndConventions(t *testing.T) {
	w, err := ByName("WiFi")
	if err != nil || w.Rate != 20_000_000 || w.Radio != "wifi" {
		t.Fatalf("wifi: %+v %v", w, err)
	}
	if w.PerDirection(false) != 25*time.Millisecond || w.PerDirection(true) != 12500*time.Microsecond {
		t.Errorf("wifi per direction: one-way %v, rtt %v", w.PerDirection(false), w.PerDirection(true))
	}
	if _, err := ByName("lte-advanced"); err == nil {
		t.Error("unknown profile accepted")
	}
	if Rank("wifi") != 0 || Rank("ethernet") != 3 || Rank("other") != 4 {
		t.Error("rank")
	}
	if r := Radios(); len(r) != 3 || r["cellular"] != "lte" || r["ethernet"] != "" {
		t.Errorf("radios %v", r)
	}
}

// TestRateUnits pins tc's meaning: "mbit" is megabits, "mbps" megabytes
// per second; every reader of iotq goes through ParseRate.
func TestRateUnits(t *testing.T) {
	for in, want := range map[string]int64{"20mbit": 20e6, "1mbps": 8e6, "512kbit": 512e3, "1.5mbit": 15e5, "9600": 9600, "0": 0, "1gbit": 1e9} {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", in, got, err, want)
		}
		if back, err := ParseRate(FormatRate(want)); err != nil || back != want {
			t.Errorf("FormatRate(%d) = %q does not parse back", want, FormatRate(want))
		}
	}
	for _, bad := range []string{"", "fast", "-1mbit", "mbit", "5%"} {
		if _, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) accepted", bad)
		}
	}
}

func TestLossPercentDurationBytes(t *testing.T) {
	if l, err := ParseLoss("5%"); err != nil || l != 0.05 {
		t.Errorf("loss 5%%: %v %v", l, err)
	}
	if _, err := ParseLoss("5"); err == nil {
		t.Error("loss 5 without %% is ambiguous and must be refused")
	}
	if p, err := ParsePercent("5"); err != nil || p != 5 {
		t.Errorf("percent 5: %v %v", p, err)
	}
	if d, err := ParseDuration("delay", "0"); err != nil || d != 0 {
		t.Errorf("duration 0: %v %v", d, err)
	}
	if _, err := ParseDuration("delay", "-5ms"); err == nil {
		t.Error("negative duration accepted")
	}
	if b, err := ParseBytes("64kb"); err != nil || b != 65536 {
		t.Errorf("64kb: %v %v", b, err)
	}
}
