package stats

import (
	"math"
	"slices"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestPercentileType7MatchesHandComputedValues(t *testing.T) {
	cases := []struct {
		xs   []float64
		p    float64
		want float64
	}{
		{[]float64{1, 2, 3, 4}, 25, 1.75},
		{[]float64{4, 3, 2, 1}, 50, 2.5}, // unsorted input
		{[]float64{1, 2, 3, 4}, 95, 3.85},
		{[]float64{1, 2, 3, 4}, 5, 1.15},
		{[]float64{15, 20, 35, 40, 50}, 40, 29},
		{[]float64{15, 20, 35, 40, 50}, 5, 16},
		{[]float64{15, 20, 35, 40, 50}, 100, 50},
		{[]float64{15, 20, 35, 40, 50}, 0, 15},
		{[]float64{7}, 95, 7},
	}
	for _, c := range cases {
		if got := Percentile(c.xs, c.p); !near(got, c.want) {
			t.Errorf("Percentile(%v, %v) = %v, want %v", c.xs, c.p, got, c.want)
		}
	}
	if !math.IsNaN(Percentile(nil, 50)) || !math.IsNaN(Percentile([]float64{1}, 101)) {
		t.Error("empty input or p > 100 must give NaN")
	}
	xs := []float64{3, 1, 2}
	Median(xs)
	if !slices.Equal(xs, []float64{3, 1, 2}) {
		t.Error("Percentile modified its input")
	}
}

func TestMeanSDRSD(t *testing.T) {
	xs := []float64{2, 4, 4, 4, 5, 5, 7, 9}
	if got := Mean(xs); got != 5 {
		t.Errorf("mean = %v, want 5", got)
	}
	// sum of squares 32, n-1 = 7
	if got, want := StdDev(xs), math.Sqrt(32.0/7); !near(got, want) {
		t.Errorf("sd = %v, want %v", got, want)
	}
	if got, want := RSD(xs), math.Sqrt(32.0/7)/5; !near(got, want) {
		t.Errorf("rsd = %v, want %v", got, want)
	}
	if !math.IsNaN(StdDev([]float64{1})) || !math.IsNaN(RSD([]float64{0, 0})) || !math.IsNaN(Mean(nil)) {
		t.Error("undefined statistics must be NaN")
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize([]float64{5, 1, 4, 2, 3})
	want := Summary{N: 5, Mean: 3, SD: math.Sqrt(2.5), RSD: math.Sqrt(2.5) / 3, Min: 1, P5: 1.2, P25: 2, Median: 3, P75: 4, P95: 4.8, Max: 5}
	got := []float64{s.Mean, s.SD, s.RSD, s.Min, s.P5, s.P25, s.Median, s.P75, s.P95, s.Max}
	exp := []float64{want.Mean, want.SD, want.RSD, want.Min, want.P5, want.P25, want.Median, want.P75, want.P95, want.Max}
	for i := range got {
		if !near(got[i], exp[i]) {
			t.Errorf("summary field %d = %v, want %v", i, got[i], exp[i])
		}
	}
	if s.N != 5 {
		t.Errorf("n = %d", s.N)
	}
	if e := Summarize(nil); e.N != 0 || !math.IsNaN(e.Median) {
		t.Errorf("empty summary = %+v", e)
	}
}

func TestBoxes(t *testing.T) {
	xs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 100}
	b := BoxTukey(xs)
	// Q1: h=2.25 -> 3.25; Q3: h=6.75 -> 7.75; IQR 4.5, upper fence 14.5.
	if !near(b.Q1, 3.25) || !near(b.Q3, 7.75) || b.Low != 1 || b.High != 9 || !slices.Equal(b.Outliers, []float64{100}) {
		t.Errorf("tukey box = %+v", b)
	}
	p := BoxPercentile(xs, 5, 95)
	// p5: h=0.45 -> 1.45; p95: h=8.55 -> 9+0.55*91 = 59.05
	if !near(p.Low, 1.45) || !near(p.High, 59.05) || !slices.Equal(p.Outliers, []float64{1, 100}) {
		t.Errorf("percentile box = %+v", p)
	}
}

func TestRatiosPerRepetition(t *testing.T) {
	got := Ratios([]float64{2, 3, 5, 9}, []float64{1, 2, 0})
	if !slices.Equal(got, []float64{2, 1.5}) {
		t.Errorf("ratios = %v, want [2 1.5] (pair with zero skipped, extra value ignored)", got)
	}
}

func TestBootstrapRatioOfMeans(t *testing.T) {
	t.Run("constant samples give a degenerate interval", func(t *testing.T) {
		iv := BootstrapRatioOfMeans([]float64{3, 3, 3}, []float64{2, 2}, BootstrapOptions{})
		if iv.Estimate != 1.5 || iv.Lo != 1.5 || iv.Hi != 1.5 || iv.Resamples != 2000 || iv.Level != 0.95 {
			t.Errorf("interval = %+v", iv)
		}
	})
	t.Run("two-point sample has hand-computable bounds", func(t *testing.T) {
		// Resampled means of {1,2} (n=2) are 1, 1.5, 2 with probability 1/4, 1/2, 1/4,
		// so the 2.5 % and 97.5 % percentiles of 2000 resamples are 1 and 2.
		iv := BootstrapRatioOfMeans([]float64{1, 2}, []float64{1}, BootstrapOptions{Seed: 7})
		if iv.Estimate != 1.5 || iv.Lo != 1 || iv.Hi != 2 {
			t.Errorf("interval = %+v, want 1.5 [1, 2]", iv)
		}
	})
	t.Run("fixed seed is reproducible and brackets the estimate", func(t *testing.T) {
		num := []float64{1.2, 1.4, 1.1, 1.6, 1.3, 1.25, 1.5, 1.35}
		den := []float64{1.0, 1.1, 0.9, 1.05, 1.2, 0.95, 1.0, 1.1}
		a := BootstrapRatioOfMeans(num, den, BootstrapOptions{Seed: 42})
		b := BootstrapRatioOfMeans(num, den, BootstrapOptions{Seed: 42})
		c := BootstrapRatioOfMeans(num, den, BootstrapOptions{Seed: 43})
		if a != b {
			t.Fatalf("same seed gave %+v and %+v", a, b)
		}
		if a.Lo == c.Lo && a.Hi == c.Hi {
			t.Errorf("different seeds gave identical bounds %+v", a)
		}
		if !(a.Lo < a.Estimate && a.Estimate < a.Hi) {
			t.Errorf("interval %+v does not bracket its estimate", a)
		}
		if !near(a.Estimate, 10.7/8.3) {
			t.Errorf("estimate = %v, want %v", a.Estimate, 10.7/8.3)
		}
		// Regression values for seed 42 (PCG, 2000 resamples); if the algorithm
		// changes on purpose, update them.
		if !near(a.Lo, wantLo42) || !near(a.Hi, wantHi42) {
			t.Errorf("seed 42 interval = [%.12f, %.12f], want [%.12f, %.12f]", a.Lo, a.Hi, wantLo42, wantHi42)
		}
	})
	t.Run("empty sample", func(t *testing.T) {
		iv := BootstrapRatioOfMeans(nil, []float64{1}, BootstrapOptions{})
		if !math.IsNaN(iv.Lo) || !math.IsNaN(iv.Estimate) {
			t.Errorf("interval = %+v, want NaN", iv)
		}
	})
}

const (
	wantLo42 = 1.170430469954
	wantHi42 = 1.422384064322
)

func TestBootstrapIntervalAndGeoMean(t *testing.T) {
	if g := GeoMean([]float64{1, 4}); !near(g, 2) {
		t.Fatalf("GeoMean(1, 4) = %v, want 2", g)
	}
	if g := GeoMean([]float64{1, 0}); !math.IsNaN(g) {
		t.Fatalf("GeoMean with a zero = %v, want NaN", g)
	}
	xs := []float64{9, 10, 11, 10, 9.5, 10.5, 10, 9.8, 10.2, 10.1}
	iv := Bootstrap([][]float64{xs}, func(s [][]float64) float64 { return Mean(s[0]) }, BootstrapOptions{Seed: 3})
	if !(iv.Lo < 10 && iv.Hi > 10) || !(iv.Lo > 9 && iv.Hi < 11) || iv.Resamples != 2000 || iv.NumeratorN != 10 {
		t.Fatalf("mean of values around 10: %+v", iv)
	}
	if e := Bootstrap([][]float64{nil}, func(s [][]float64) float64 { return 1 }, BootstrapOptions{}); !math.IsNaN(e.Lo) || !math.IsNaN(e.Estimate) {
		t.Fatalf("empty sample: %+v, want NaN", e)
	}
}
