package trace

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Model generates a cellular-like packet-delivery trace. It is a model,
// not a measurement: it has the three features measured cellular traces
// show, with parameters that are this project's assumptions (docs/link.md):
//
//   - capacity that wanders over seconds by a factor of a few: its
//     logarithm is a Gaussian AR(1) process, updated every Step, with
//     median MedianRate, stationary standard deviation Sigma and
//     correlation time Corr, clipped to [MinRate, MaxRate];
//   - deliveries bunched per scheduling slot: in each Slot (LTE's 1 ms
//     TTI) the number of MTU-sized opportunities is Poisson with mean
//     rate x Slot / (MTU x 8);
//   - outages: a two-state chain per slot enters an outage on average
//     every OutageEvery and stays in it for OutageMean on average (both
//     exponential); an outage delivers nothing.
//
// The trace is Duration long; its last line is at Duration (the period).
type Model struct {
	Name        string
	Duration    time.Duration
	MedianRate  int64 // bit/s
	Sigma       float64
	Corr        time.Duration
	Step        time.Duration
	MinRate     int64 // bit/s
	MaxRate     int64 // bit/s
	Slot        time.Duration
	OutageEvery time.Duration
	OutageMean  time.Duration
	MTU         int
	Seed        uint64
}

// Validate says what is wrong with m.
func (m Model) Validate() error {
	switch {
	case m.Slot < time.Millisecond || m.Slot%time.Millisecond != 0:
		return fmt.Errorf("model %s: slot %v: want whole milliseconds", m.Name, m.Slot)
	case m.Duration < m.Slot || m.Duration%time.Millisecond != 0:
		return fmt.Errorf("model %s: duration %v: want whole milliseconds, at least one slot", m.Name, m.Duration)
	case m.MedianRate <= 0 || m.MinRate <= 0 || m.MaxRate < m.MinRate:
		return fmt.Errorf("model %s: rates median %d, min %d, max %d bit/s: want 0 < min <= max", m.Name, m.MedianRate, m.MinRate, m.MaxRate)
	case m.Sigma < 0 || m.Corr <= 0 || m.Step <= 0:
		return fmt.Errorf("model %s: sigma %g, correlation time %v, step %v: want sigma >= 0 and positive times", m.Name, m.Sigma, m.Corr, m.Step)
	case m.OutageEvery < 0 || m.OutageMean < 0 || (m.OutageEvery > 0) != (m.OutageMean > 0):
		return fmt.Errorf("model %s: outages every %v for %v: give both or neither", m.Name, m.OutageEvery, m.OutageMean)
	case m.MTU < 576:
		return fmt.Errorf("model %s: mtu %d: want at least 576", m.Name, m.MTU)
	}
	return nil
}

// Generate draws the trace of m. The same model (seed included) gives the
// same trace.
func (m Model) Generate() (*Trace, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(m.Seed, m.Seed^0x6a09e667f3bcc909))
	phi := math.Exp(-m.Step.Seconds() / m.Corr.Seconds())
	innov := m.Sigma * math.Sqrt(1-phi*phi)
	x := m.Sigma * rng.NormFloat64() // start in the stationary distribution
	rate := func() float64 {
		r := float64(m.MedianRate) * math.Exp(x)
		return math.Min(math.Max(r, float64(m.MinRate)), float64(m.MaxRate))
	}
	pIn, pOut := 0.0, 0.0
	if m.OutageEvery > 0 {
		pIn, pOut = m.Slot.Seconds()/m.OutageEvery.Seconds(), m.Slot.Seconds()/m.OutageMean.Seconds()
	}
	out := false
	t := &Trace{Name: m.Name, Period: m.Duration}
	nextStep := m.Step
	for at := m.Slot; at <= m.Duration; at += m.Slot {
		for at >= nextStep {
			x = phi*x + innov*rng.NormFloat64()
			nextStep += m.Step
		}
		if out {
			out = rng.Float64() >= pOut
		} else {
			out = rng.Float64() < pIn
		}
		if out {
			continue
		}
		k := poisson(rng, rate()*m.Slot.Seconds()/float64(m.MTU*8))
		for range k {
			t.Times = append(t.Times, at)
		}
	}
	if len(t.Times) == 0 || t.Times[len(t.Times)-1] != m.Duration {
		t.Times = append(t.Times, m.Duration) // the period's mark
	}
	return t, nil
}

// poisson draws a Poisson variate with mean lambda (Knuth's product of
// uniforms; lambda here is a few per slot at most).
func poisson(rng *rand.Rand, lambda float64) int {
	if lambda <= 0 {
		return 0
	}
	if lambda > 30 {
		// normal approximation, never reached by the shipped models
		return max(0, int(math.Round(lambda+math.Sqrt(lambda)*rng.NormFloat64())))
	}
	l, k, p := math.Exp(-lambda), 0, 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// Summary describes a trace for people: its length, opportunities, mean
// rate and the spread of its per-second rates.
type Summary struct {
	Name          string
	Period        time.Duration
	Opportunities int
	MeanRate      int64         // bit/s with MTU-sized opportunities
	P5Rate        int64         // 5th percentile of the 1 s rates
	P95Rate       int64         // 95th percentile of the 1 s rates
	LongestGap    time.Duration // longest time between two opportunities
}

// Summarize computes t's summary for opportunities of mtu bytes.
func (t *Trace) Summarize(mtu int) Summary {
	s := Summary{Name: t.Name, Period: t.Period, Opportunities: len(t.Times), MeanRate: t.MeanRate(mtu)}
	secs := int(t.Period / time.Second)
	if secs > 0 {
		per := make([]int, secs)
		for _, at := range t.Times {
			if i := int(at / time.Second); i < secs {
				per[i]++
			}
		}
		slices.Sort(per)
		s.P5Rate = int64(per[int(0.05*float64(secs-1))] * mtu * 8)
		s.P95Rate = int64(per[int(math.Ceil(0.95*float64(secs-1)))] * mtu * 8)
	}
	prev := time.Duration(0)
	for _, at := range t.Times {
		s.LongestGap = max(s.LongestGap, at-prev)
		prev = at
	}
	return s
}
