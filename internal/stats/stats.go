package stats

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Mean returns the arithmetic mean of xs, or NaN when xs is empty.
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// StdDev returns the sample standard deviation of xs (divisor n-1).
// It is NaN for fewer than two values.
func StdDev(xs []float64) float64 {
	if len(xs) < 2 {
		return math.NaN()
	}
	m := Mean(xs)
	var ss float64
	for _, x := range xs {
		d := x - m
		ss += d * d
	}
	return math.Sqrt(ss / float64(len(xs)-1))
}

// RSD returns the relative standard deviation StdDev(xs)/Mean(xs) as a
// fraction (multiply by 100 for per cent). It is NaN when the mean is zero
// or there are fewer than two values.
func RSD(xs []float64) float64 {
	m := Mean(xs)
	if m == 0 || math.IsNaN(m) {
		return math.NaN()
	}
	return StdDev(xs) / m
}

// Sorted returns a sorted copy of xs.
func Sorted(xs []float64) []float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s
}

// Percentile returns the p-th percentile (0 <= p <= 100) of xs by linear
// interpolation between closest ranks (type 7): with the values sorted as
// x[0..n-1] and h = (n-1)*p/100, the result is
// x[floor(h)] + (h-floor(h)) * (x[floor(h)+1] - x[floor(h)]).
// It is NaN for an empty slice or p outside [0, 100].
func Percentile(xs []float64, p float64) float64 {
	return PercentileSorted(Sorted(xs), p)
}

// PercentileSorted is Percentile for an already sorted slice.
func PercentileSorted(s []float64, p float64) float64 {
	if len(s) == 0 || p < 0 || p > 100 || math.IsNaN(p) {
		return math.NaN()
	}
	h := float64(len(s)-1) * p / 100
	lo := math.Floor(h)
	i := int(lo)
	if i >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[i] + (h-lo)*(s[i+1]-s[i])
}

// Median returns the 50th percentile of xs.
func Median(xs []float64) float64 { return Percentile(xs, 50) }

// Summary is the usual description of a sample.
type Summary struct {
	N      int     `json:"n"`
	Mean   float64 `json:"mean"`
	SD     float64 `json:"sd"`
	RSD    float64 `json:"rsd"`
	Min    float64 `json:"min"`
	P5     float64 `json:"p5"`
	P25    float64 `json:"p25"`
	Median float64 `json:"median"`
	P75    float64 `json:"p75"`
	P95    float64 `json:"p95"`
	Max    float64 `json:"max"`
}

// Summarize describes xs. Fields are NaN where undefined (empty sample, or
// SD and RSD of a single value).
func Summarize(xs []float64) Summary {
	s := Sorted(xs)
	out := Summary{N: len(s), Mean: Mean(s), SD: StdDev(s), RSD: RSD(s)}
	if len(s) == 0 {
		nan := math.NaN()
		out.Min, out.P5, out.P25, out.Median, out.P75, out.P95, out.Max = nan, nan, nan, nan, nan, nan, nan
		return out
	}
	out.Min = s[0]
	out.Max = s[len(s)-1]
	out.P5 = PercentileSorted(s, 5)
	out.P25 = PercentileSorted(s, 25)
	out.Median = PercentileSorted(s, 50)
	out.P75 = PercentileSorted(s, 75)
	out.P95 = PercentileSorted(s, 95)
	return out
}

// Box is what a box plot draws: a box from Q1 to Q3 with the median,
// whiskers from Low to High, and the values outside the whiskers.
type Box struct {
	Q1, Median, Q3 float64
	Low, High      float64
	Outliers       []float64
}

// BoxPercentile builds a box whose whiskers end at the lo-th and hi-th
// percentiles (for example 5 and 95); values outside are outliers.
func BoxPercentile(xs []float64, lo, hi float64) Box {
	s := Sorted(xs)
	b := Box{
		Q1: PercentileSorted(s, 25), Median: PercentileSorted(s, 50), Q3: PercentileSorted(s, 75),
		Low: PercentileSorted(s, lo), High: PercentileSorted(s, hi),
	}
	b.Outliers = outside(s, b.Low, b.High)
	return b
}

// BoxTukey builds a box whose whiskers reach the most extreme values within
// 1.5 interquartile ranges of the box (Tukey); values beyond are outliers.
func BoxTukey(xs []float64) Box {
	s := Sorted(xs)
	b := Box{Q1: PercentileSorted(s, 25), Median: PercentileSorted(s, 50), Q3: PercentileSorted(s, 75)}
	if len(s) == 0 {
		b.Low, b.High = math.NaN(), math.NaN()
		return b
	}
	iqr := b.Q3 - b.Q1
	loFence, hiFence := b.Q1-1.5*iqr, b.Q3+1.5*iqr
	b.Low, b.High = b.Q1, b.Q3
	for _, x := range s {
		if x >= loFence {
			b.Low = math.Min(x, b.Q1)
			break
		}
	}
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] <= hiFence {
			b.High = math.Max(s[i], b.Q3)
			break
		}
	}
	b.Outliers = outside(s, b.Low, b.High)
	return b
}

func outside(sorted []float64, lo, hi float64) []float64 {
	var out []float64
	for _, x := range sorted {
		if x < lo || x > hi {
			out = append(out, x)
		}
	}
	return out
}

// Ratios returns a[i]/b[i] for the pairs present in both slices (the shorter
// length wins); pairs with b[i] == 0 are skipped.
func Ratios(a, b []float64) []float64 {
	n := min(len(a), len(b))
	out := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		if b[i] != 0 {
			out = append(out, a[i]/b[i])
		}
	}
	return out
}

// Interval is a point estimate with a confidence interval.
type Interval struct {
	Estimate   float64 `json:"estimate"`
	Lo         float64 `json:"lo"`
	Hi         float64 `json:"hi"`
	Level      float64 `json:"level"`
	Resamples  int     `json:"resamples"`
	Seed       uint64  `json:"seed"`
	NumeratorN int     `json:"n_num"`
	DenomN     int     `json:"n_den"`
}

// BootstrapOptions configures BootstrapRatioOfMeans. Zero values mean the
// defaults given per field.
type BootstrapOptions struct {
	// Resamples is the number of bootstrap resamples; 0 means 2000.
	Resamples int
	// Level is the confidence level in (0, 1); 0 means 0.95.
	Level float64
	// Seed seeds the PCG generator (math/rand/v2); 0 means seed 1.
	Seed uint64
}

func (o BootstrapOptions) withDefaults() BootstrapOptions {
	if o.Resamples <= 0 {
		o.Resamples = 2000
	}
	if o.Level <= 0 || o.Level >= 1 {
		o.Level = 0.95
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	return o
}

// BootstrapRatioOfMeans estimates Mean(num)/Mean(den) with a percentile
// bootstrap confidence interval (Bootstrap with the two samples resampled
// independently). Lo and Hi are NaN when either sample is empty.
func BootstrapRatioOfMeans(num, den []float64, opts BootstrapOptions) Interval {
	iv := Bootstrap([][]float64{num, den}, func(s [][]float64) float64 {
		d := Mean(s[1])
		if d == 0 {
			return math.NaN()
		}
		return Mean(s[0]) / d
	}, opts)
	if len(num) == 0 || len(den) == 0 {
		iv.Estimate = math.NaN()
	}
	return iv
}

// Bootstrap estimates stat(samples) with a percentile bootstrap confidence
// interval: each resample draws len(samples[i]) values from each sample
// with replacement (the samples are resampled independently, in order),
// computes stat of the resampled samples, and the interval is given by the
// (1-Level)/2 and (1+Level)/2 percentiles (type 7) of the finite results.
// The generator is PCG seeded with (Seed, Seed^0x9e3779b97f4a7c15), so a
// given seed always yields the same interval. Lo and Hi are NaN when a
// sample is empty or no resample gives a finite result. NumeratorN and
// DenomN are the sizes of the first and the second sample.
func Bootstrap(samples [][]float64, stat func([][]float64) float64, opts BootstrapOptions) Interval {
	o := opts.withDefaults()
	iv := Interval{Level: o.Level, Resamples: o.Resamples, Seed: o.Seed}
	if len(samples) > 0 {
		iv.NumeratorN = len(samples[0])
	}
	if len(samples) > 1 {
		iv.DenomN = len(samples[1])
	}
	iv.Estimate, iv.Lo, iv.Hi = math.NaN(), math.NaN(), math.NaN()
	if len(samples) == 0 {
		return iv
	}
	for _, s := range samples {
		if len(s) == 0 {
			return iv
		}
	}
	iv.Estimate = stat(samples)
	rng := rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15))
	re := make([][]float64, len(samples))
	for i, s := range samples {
		re[i] = make([]float64, len(s))
	}
	vals := make([]float64, 0, o.Resamples)
	for r := 0; r < o.Resamples; r++ {
		for i, s := range samples {
			for j := range s {
				re[i][j] = s[rng.IntN(len(s))]
			}
		}
		if v := stat(re); !math.IsNaN(v) && !math.IsInf(v, 0) {
			vals = append(vals, v)
		}
	}
	slices.Sort(vals)
	alpha := (1 - o.Level) / 2
	iv.Lo = PercentileSorted(vals, 100*alpha)
	iv.Hi = PercentileSorted(vals, 100*(1-alpha))
	return iv
}

// GeoMean returns the geometric mean of xs (exp of the mean of the logs),
// NaN when xs is empty or holds a value that is not positive.
func GeoMean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var s float64
	for _, x := range xs {
		if !(x > 0) {
			return math.NaN()
		}
		s += math.Log(x)
	}
	return math.Exp(s / float64(len(xs)))
}
