package link

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		err  string
	}{
		{"20mbit", 20_000_000, ""},
		{"1.5mbit", 1_500_000, ""},
		{"512kbit", 512_000, ""},
		{"1gbit", 1_000_000_000, ""},
		{"9600", 9600, ""},
		{"1mbps", 8_000_000, ""},
		{"0", 0, ""},
		{"fast", 0, "not understood"},
		{"-1mbit", 0, "negative"},
		{"", 0, "empty"},
	}
	for _, c := range cases {
		got, err := ParseRate(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseRate(%q) error = %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, r := range []int64{20_000_000, 1_500_000, 512_000, 1_000_000_000, 9601} {
		back, err := ParseRate(FormatRate(r))
		if err != nil || back != r {
			t.Errorf("FormatRate(%d) = %q does not parse back: %d %v", r, FormatRate(r), back, err)
		}
	}
}

func TestParseLoss(t *testing.T) {
	cases := []struct {
		in   string
		want float64
		err  string
	}{
		{"5%", 0.05, ""},
		{"0.5%", 0.005, ""},
		{"0", 0, ""},
		{"0.05", 0.05, ""},
		{"100%", 1, ""},
		{"5%%", 0, "one % sign"},
		{"5", 0, "ambiguous"},
		{"-1%", 0, "outside"},
		{"120%", 0, "outside"},
	}
	for _, c := range cases {
		got, err := ParseLoss(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseLoss(%q) error = %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || math.Abs(got-c.want) > 1e-12 {
			t.Errorf("ParseLoss(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	if _, err := ParseDuration("delay", "-5ms"); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("negative delay accepted: %v", err)
	}
}

func TestProfilesStateOneWayAndRTT(t *testing.T) {
	p, err := ProfileByName("wifi")
	if err != nil {
		t.Fatal(err)
	}
	if p.OneWay().Delay != 25*time.Millisecond || p.RTT().Delay != 12500*time.Microsecond {
		t.Errorf("wifi one-way %v rtt-half %v", p.OneWay().Delay, p.RTT().Delay)
	}
	if p.Rate != 20_000_000 {
		t.Errorf("wifi rate %d", p.Rate)
	}
	if _, err := ProfileByName("lte-advanced"); err == nil {
		t.Error("unknown profile accepted")
	}
}

// TestBernoulliLossWithinFourSigma sends 10000 packets through 5 % loss.
func TestBernoulliLossWithinFourSigma(t *testing.T) {
	const n, p = 10000, 0.05
	for seed := uint64(1); seed <= 5; seed++ {
		d := NewDir(Params{Loss: p}, 0, 0, seed)
		lost := 0
		for i := range n {
			if d.Arrive(time.Duration(i)*time.Millisecond, 100, nil)[0].Drop == CauseRandom {
				lost++
			}
		}
		sigma := math.Sqrt(n * p * (1 - p))
		if math.Abs(float64(lost)-n*p) > 4*sigma {
			t.Errorf("seed %d: lost %d of %d, want %v ± %.0f", seed, lost, n, n*p, 4*sigma)
		}
		if s := d.Stats(); s.DropRandom != uint64(lost) || s.Packets != uint64(n-lost) {
			t.Errorf("stats %+v disagree with %d lost", s, lost)
		}
	}
}

// TestGilbertElliottMeanLossAndBurstLength checks the stationary loss rate
// p/(p+r) and the mean burst length 1/r of the simple Gilbert model
// (1-h = 1, 1-k = 0), and the mean loss of a general model.
func TestGilbertElliottMeanLossAndBurstLength(t *testing.T) {
	const n = 400000
	cases := []GE{
		{P: 0.01, R: 0.25},                 // simple Gilbert: bursts of 4
		{P: 0.02, R: 0.5},                  // bursts of 2
		{P: 0.05, R: 0.3, H: 0.7, K: 0.01}, // Gilbert-Elliott
	}
	for _, g := range cases {
		g := g
		d := NewDir(Params{GilbertElliott: &g}, 0, 0, 42)
		lost, bursts, run := 0, 0, 0
		for i := range n {
			if d.Arrive(time.Duration(i), 100, nil)[0].Drop == CauseRandom {
				lost++
				run++
			} else if run > 0 {
				bursts++
				run = 0
			}
		}
		mean := float64(lost) / n
		if want := g.MeanLoss(); math.Abs(mean-want) > 0.1*want {
			t.Errorf("%+v: mean loss %.4f, want %.4f ± 10%%", g, mean, want)
		}
		if g.H == 0 && g.K == 0 {
			burst := float64(lost) / float64(bursts)
			if want := 1 / g.R; math.Abs(burst-want) > 0.1*want {
				t.Errorf("%+v: mean burst %.2f, want %.2f ± 10%%", g, burst, want)
			}
		}
	}
}

// TestQueueOverflowAndQueueingDelayBound offers twice the rate and checks
// drops by queue overflow, the rate of delivery and that no packet waits
// longer than queue/rate.
func TestQueueOverflowAndQueueingDelayBound(t *testing.T) {
	const rate = 10_000_000
	const size = 1250 // 1 ms at 10 Mbit/s
	p := Params{Rate: rate, QueueBytes: 20 * size, Delay: 10 * time.Millisecond}
	d := NewDir(p, 20*time.Millisecond, 0, 1)
	bound := txTime(p.QueueBytes, rate)
	var lastDep time.Duration
	delivered := 0
	var at []time.Duration
	for i := range 4000 { // 2000 ms of arrivals every 0.5 ms
		at = append(at, time.Duration(i)*500*time.Microsecond)
	}
	evs := sim(t, d, at, size, 0)
	for i, v := range evs {
		now := at[i]
		if v.Drop != CauseNone {
			if v.Drop != CauseQueue {
				t.Fatalf("unexpected drop cause %v", v.Drop)
			}
			continue
		}
		delivered++
		if v.Wait > bound {
			t.Fatalf("packet %d waited %v > queue/rate %v", i, v.Wait, bound)
		}
		if v.Depart < lastDep {
			t.Fatalf("reordered")
		}
		lastDep = v.Depart
		if min := now + txTime(size, rate) + p.Delay; v.Depart < min {
			t.Fatalf("departed %v before %v", v.Depart, min)
		}
	}
	s := d.Stats()
	if s.DropQueue < 1500 || s.DropQueue > 2100 {
		t.Errorf("queue drops %d, want about 2000", s.DropQueue)
	}
	// delivered bits over the last departure: at most the rate.
	got := float64(delivered*size*8) / (lastDep - p.Delay).Seconds()
	if got > rate*1.001 || got < rate*0.95 {
		t.Errorf("delivery rate %.0f bit/s, want %d", got, rate)
	}
	if s.QueueDelay.Max > bound {
		t.Errorf("histogram max %v > bound %v", s.QueueDelay.Max, bound)
	}
	var inHist int64
	prev := int64(0)
	for _, b := range s.QueueDelay.Hist {
		inHist += b.N
		if b.UpperUS <= prev {
			t.Fatalf("buckets out of order: %+v", s.QueueDelay.Hist)
		}
		prev = b.UpperUS
	}
	if inHist != int64(delivered) || inHist != s.QueueDelay.N {
		t.Errorf("histogram holds %d delays, %d packets delivered", inHist, delivered)
	}
	if last := s.QueueDelay.Hist[len(s.QueueDelay.Hist)-1]; time.Duration(last.UpperUS/2)*time.Microsecond > bound {
		t.Errorf("last bucket %+v starts above the bound %v", last, bound)
	}
}

func TestDefaultQueueIsOneBDP(t *testing.T) {
	p := Params{Rate: 20_000_000}
	if got := p.QueueLimit(50 * time.Millisecond); got != 125000 {
		t.Errorf("BDP queue %d, want 125000", got)
	}
	if got := p.QueueLimit(0); got != MinQueueBytes {
		t.Errorf("floor %d, want %d", got, MinQueueBytes)
	}
	if got := (Params{}).QueueLimit(time.Second); got != 0 {
		t.Errorf("unlimited rate has queue %d", got)
	}
}

func TestJitterNeverReordersUnlessAsked(t *testing.T) {
	for _, dist := range []string{DistNormal, DistUniform, DistPareto, DistParetoNormal} {
		d := NewDir(Params{Delay: 20 * time.Millisecond, Jitter: 5 * time.Millisecond, JitterDist: dist}, 0, 0, 3)
		var last time.Duration
		var sum time.Duration
		for i := range 5000 {
			now := time.Duration(i) * 100 * time.Microsecond
			v := d.Arrive(now, 100, nil)[0]
			if v.Depart < last {
				t.Fatalf("%s: reordered", dist)
			}
			if v.Depart < now {
				t.Fatalf("%s: negative delay", dist)
			}
			last = v.Depart
			sum += v.Depart - now
		}
		if mean := sum / 5000; mean < 20*time.Millisecond {
			t.Errorf("%s: mean delay %v below base delay", dist, mean)
		}
		r := NewDir(Params{Delay: 20 * time.Millisecond, Jitter: 5 * time.Millisecond, JitterDist: dist, Reorder: true}, 0, 0, 3)
		reordered := false
		last = 0
		for i := range 5000 {
			v := r.Arrive(time.Duration(i)*100*time.Microsecond, 100, nil)[0]
			if v.Depart < last {
				reordered = true
			}
			last = v.Depart
		}
		if !reordered {
			t.Errorf("%s: Reorder=true never reordered", dist)
		}
	}
}

func TestScheduleDownAndSteps(t *testing.T) {
	loss := 1.0
	delay := 50 * time.Millisecond
	p := Params{Delay: 10 * time.Millisecond, Schedule: []Step{
		{At: time.Second, Down: 2 * time.Second},
		{At: 4 * time.Second, Delay: &delay},
		{At: 5 * time.Second, Loss: &loss},
	}}
	start := 7 * time.Hour
	d := NewDir(p, 0, start, 1)
	check := func(at time.Duration, wantDrop Cause, wantDelay time.Duration) {
		t.Helper()
		v := d.Arrive(start+at, 100, nil)[0]
		if v.Drop != wantDrop {
			t.Fatalf("at %v: drop %v, want %v", at, v.Drop, wantDrop)
		}
		if wantDrop == CauseNone && v.Depart-(start+at) != wantDelay {
			t.Fatalf("at %v: delay %v, want %v", at, v.Depart-(start+at), wantDelay)
		}
	}
	check(500*time.Millisecond, CauseNone, 10*time.Millisecond)
	check(time.Second, CauseDown, 0)
	check(2999*time.Millisecond, CauseDown, 0)
	check(3*time.Second, CauseNone, 10*time.Millisecond)
	check(4500*time.Millisecond, CauseNone, 50*time.Millisecond)
	check(5*time.Second, CauseRandom, 0)
	if s := d.Stats(); s.DropDown != 2 || s.DropRandom != 1 || s.Packets != 3 {
		t.Errorf("stats %+v", s)
	}
}

// TestMediumCapacityAndResidualLoss: three saturating senders never get
// more than the capacity in total, and residual loss is FER^(R+1).
func TestMediumCapacityAndResidualLoss(t *testing.T) {
	for _, c := range []struct {
		fer     float64
		retries int
	}{{0, 0}, {0.1, 0}, {0.3, 1}, {0.3, 2}, {0.5, 3}} {
		mp := MediumParams{Capacity: 20_000_000, FrameErrorRate: c.fer, Retries: c.retries, Delay: 5 * time.Millisecond}
		m := NewMediumModel(mp, 4, 9)
		const size = 1000
		var lastDep time.Duration
		delivered, sent := 0, 0
		// stations 1..3 each offer 10 Mbit/s (30 Mbit/s total) for 2 s.
		for i := range 7500 {
			now := time.Duration(i) * 800 * time.Microsecond / 3
			from := 1 + i%3
			sent++
			v := m.Arrive(now, from, 0, size)
			if v.Drop == CauseNone {
				delivered++
				lastDep = max(lastDep, v.Depart)
			}
		}
		total := float64(delivered*size*8) / (lastDep - mp.Delay).Seconds()
		if total > float64(mp.Capacity) {
			t.Errorf("fer %v R %d: delivered %.0f bit/s > capacity", c.fer, c.retries, total)
		}
		var tries, retr, pk uint64
		for s := 1; s <= 3; s++ {
			st := m.Stats(s, 0)
			retr += st.DropRetries
			pk += st.Packets
			tries += st.Tries
		}
		frames := retr + pk // frames that got air time
		want := math.Pow(c.fer, float64(c.retries+1))
		got := float64(retr) / float64(frames)
		sigma := math.Sqrt(want * (1 - want) / float64(frames))
		if math.Abs(got-want) > 4*sigma+1e-9 {
			t.Errorf("fer %v R %d: residual loss %.4f, want %.4f ± %.4f (frames %d)", c.fer, c.retries, got, want, 4*sigma, frames)
		}
		if c.fer == 0 && tries != frames {
			t.Errorf("clean medium: %d tries for %d frames", tries, frames)
		}
	}
}

func TestValidateCollectsEveryProblem(t *testing.T) {
	err := Params{Delay: -1, Loss: 2, Rate: -5, JitterDist: "gauss"}.Validate("links[0].a_to_b")
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"delay", "loss", "rate", "gauss", "links[0].a_to_b"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestParseGE(t *testing.T) {
	g, err := ParseGE("1%,25%")
	if err != nil || g.P != 0.01 || g.R != 0.25 || g.lossBad() != 1 || g.K != 0 {
		t.Errorf("ParseGE = %+v %v", g, err)
	}
	g, err = ParseGE("5%, 30%, 70%, 1%")
	if err != nil || g.H != 0.7 || g.K != 0.01 {
		t.Errorf("ParseGE = %+v %v", g, err)
	}
	for _, bad := range []string{"1%", "1%,2%,3%,4%,5%", "1%,x"} {
		if _, err := ParseGE(bad); err == nil {
			t.Errorf("ParseGE(%q) accepted", bad)
		}
	}
}

func TestJitterDistributions(t *testing.T) {
	const j = 4 * time.Millisecond
	base := 50 * time.Millisecond
	for _, c := range []struct {
		dist     string
		mean, sd float64 // of the added delay, in units of j
		lo, hi   float64 // bounds in units of j (NaN: none)
	}{
		{DistNormal, 0, 1, math.NaN(), math.NaN()},
		{DistUniform, 0, 1 / math.Sqrt(3), -1, 1},
		{DistPareto, 1, math.NaN(), 0, math.NaN()},
	} {
		d := NewDir(Params{Delay: base, Jitter: j, JitterDist: c.dist, Reorder: true}, 0, 0, 5)
		var sum, sq float64
		const n = 50000
		for i := range n {
			now := time.Duration(i) * time.Millisecond
			x := float64(d.Arrive(now, 100, nil)[0].Depart-now-base) / float64(j)
			sum += x
			sq += x * x
			if !math.IsNaN(c.lo) && x < c.lo-1e-9 || !math.IsNaN(c.hi) && x > c.hi+1e-9 {
				t.Fatalf("%s: sample %.3f j outside [%v, %v]", c.dist, x, c.lo, c.hi)
			}
		}
		mean := sum / n
		sd := math.Sqrt(sq/n - mean*mean)
		if math.Abs(mean-c.mean) > 0.05 {
			t.Errorf("%s: mean %.3f j, want %.3f j", c.dist, mean, c.mean)
		}
		if !math.IsNaN(c.sd) && math.Abs(sd-c.sd) > 0.05 {
			t.Errorf("%s: sd %.3f j, want %.3f j", c.dist, sd, c.sd)
		}
	}
}
