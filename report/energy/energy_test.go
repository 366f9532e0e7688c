package energy

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestRadioMatchesHandComputedTimeline(t *testing.T) {
	m := Model{Name: "test", PromotionW: 1, PromotionS: 0.2, BaseW: 2, UpWPerMbps: 1, DownWPerMbps: 0.5,
		TailW: 0.5, TailS: 1, IdleW: 0.1}
	ev := []Event{
		{TimeNs: 5_050_000_000, Bytes: 12500, Up: true}, // bin 50, after a long gap: promotion again
		{TimeNs: 50_000_000, Bytes: 12500, Up: true},    // bin 0: 1 Mbit/s up
		{TimeNs: 550_000_000, Bytes: 25000, Up: false},  // bin 5: 2 Mbit/s down, gap 0.4 s in the tail
	}
	b := m.Radio(ev, 0, 10_000_000_000, 0)
	// promotion 2 x 0.2 J; active 3 x 0.3 J; tail 0.4*0.5 + 1*0.5 + 1*0.5;
	// idle (4.4-1-0.2)*0.1 + (4.9-1)*0.1.
	want := Breakdown{PromotionJ: 0.4, ActiveJ: 0.9, TailJ: 1.2, IdleJ: 0.71, TotalJ: 3.21, Promotions: 2, ActiveS: 0.3, WindowS: 10}
	got := []float64{b.PromotionJ, b.ActiveJ, b.TailJ, b.IdleJ, b.TotalJ, b.ActiveS, b.WindowS}
	exp := []float64{want.PromotionJ, want.ActiveJ, want.TailJ, want.IdleJ, want.TotalJ, want.ActiveS, want.WindowS}
	for i := range got {
		if !near(got[i], exp[i]) {
			t.Errorf("breakdown field %d = %v, want %v (got %+v)", i, got[i], exp[i], b)
		}
	}
	if b.Promotions != 2 {
		t.Errorf("promotions = %d, want 2", b.Promotions)
	}
	if e := m.Radio(nil, 0, 2e9, 0); !near(e.TotalJ, 0.2) || e.Promotions != 0 {
		t.Errorf("idle window = %+v, want 0.2 J idle only", e)
	}
}

func TestTotalsFallback(t *testing.T) {
	m := Model{PromotionW: 1, PromotionS: 0.5, BaseW: 1, UpWPerMbps: 1, DownWPerMbps: 1, TailW: 2, TailS: 1}
	b := m.Totals(125000, 125000, 1) // 1 Mbit/s each way for 1 s
	if !near(b.TotalJ, 0.5+3+2) {
		t.Errorf("totals = %+v, want 5.5 J", b)
	}
}

func TestDefaultsAreValidAndMapped(t *testing.T) {
	for tech, m := range Defaults() {
		if err := m.Validate(); err != nil {
			t.Errorf("%s: %v", tech, err)
		}
	}
	if Defaults()["lte"].TailS != 11.576 {
		t.Error("profile mapping or LTE tail changed")
	}
	if CPU(2_500_000_000, 2) != 5 {
		t.Error("CPU energy of 2.5 s at 2 W is not 5 J")
	}
}

func TestLoadModels(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "e.json")
	os.WriteFile(p, []byte(`{"satellite": {"base_w": 25, "idle_w": 12, "source": "terminal X data sheet"}}`), 0o644)
	ms, err := LoadModels(p)
	if err != nil {
		t.Fatal(err)
	}
	if s := ms["satellite"]; s.BaseW != 25 || s.IdleW != 12 || s.UpWPerMbps != 2 || s.Source != "terminal X data sheet" {
		t.Errorf("satellite = %+v", s)
	}
	os.WriteFile(p, []byte(`{"lte": {"tail": 3}}`), 0o644)
	if _, err := LoadModels(p); err == nil || !strings.Contains(err.Error(), "tail") {
		t.Errorf("unknown field: err = %v", err)
	}
	os.WriteFile(p, []byte(`{"lte": {"tail_s": -3}}`), 0o644)
	if _, err := LoadModels(p); err == nil || !strings.Contains(err.Error(), "tail_s=-3") {
		t.Errorf("negative value: err = %v", err)
	}
}

func TestPowerLogAlignment(t *testing.T) {
	p := filepath.Join(t.TempDir(), "power.csv")
	os.WriteFile(p, []byte("timestamp,watts\n1.0,3\n0,1\n2,3\n"), 0o644)
	l, err := ReadPowerLog(p)
	if err != nil {
		t.Fatal(err)
	}
	j, w, ok := l.Energy(500_000_000, 1_500_000_000)
	if !ok || !near(j, 2.75) || !near(w, 2.75) {
		t.Errorf("energy = %v J, %v W, ok=%v; want 2.75 J", j, w, ok)
	}
	if _, _, ok := l.Energy(5e9, 6e9); ok {
		t.Error("a window after the log must not align")
	}
	os.WriteFile(p, []byte("t,w\n1,abc\n"), 0o644)
	if _, err := ReadPowerLog(p); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad row: err = %v", err)
	}
}

func TestParseTimestamp(t *testing.T) {
	cases := map[string]int64{
		"1700000000":           1_700_000_000_000_000_000,
		"1700000000123":        1_700_000_000_123_000_000,
		"1700000000123456":     1_700_000_000_123_456_000,
		"1700000000123456789":  1_700_000_000_123_456_789,
		"1700000000.5":         1_700_000_000_500_000_000,
		"2023-11-14T22:13:20Z": 1_700_000_000_000_000_000,
	}
	for in, want := range cases {
		got, err := ParseTimestamp(in)
		if err != nil || got != want {
			t.Errorf("ParseTimestamp(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := ParseTimestamp("yesterday"); err == nil {
		t.Error("text timestamp accepted")
	}
}

func FuzzParseTimestamp(f *testing.F) {
	for _, s := range []string{"1700000000", "1700000000.25", "2023-11-14T22:13:20Z", "-5", "1e400", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParseTimestamp(s)
	})
}
