package report

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iotq/iotq/internal/stats"
	"github.com/iotq/iotq/records"
)

// synthCells builds n periodic configurations (wifi, 5 % loss) whose TCP
// cell has mean delay tcp and whose QUIC cell has mean delay tcp*factor,
// each with noise of relative size spread between configurations.
func synthCells(n int, factor, spread float64, seed uint64) []*CellResult {
	rng := rand.New(rand.NewPCG(seed, seed))
	var out []*CellResult
	for i := range n {
		base := 30 + 10*rng.Float64()
		for _, tr := range []string{"mqtts", "quic"} {
			mean := base
			if tr == "quic" {
				mean = base * factor * (1 + spread*(rng.Float64()-0.5))
			}
			c := &CellResult{Cell: tr + string(rune('a'+i)), Experiment: "E1", Profile: "wifi", LossPct: 5, Transport: tr,
				Pattern: records.PatternPeriodic, Kind: KindPeriodic, Size: 100 + i, protocol: records.ProtocolMQTT,
				DelayMs: stats.Summary{N: 1000, Mean: mean, RSD: 0.2 * mean / base}}
			out = append(out, c)
		}
	}
	return out
}

func findCmp(t *testing.T, cs []*Comparison, profile, metric string) *Comparison {
	t.Helper()
	for _, c := range cs {
		if c.Profile == profile && c.Metric == metric {
			return c
		}
	}
	t.Fatalf("no comparison %q %s in %d", profile, metric, len(cs))
	return nil
}

func TestComparisonCIExcludesNullForARealCut(t *testing.T) {
	cs := comparisons(synthCells(12, 0.8, 0.1, 1), nil, nil, 1, 2000)
	c := findCmp(t, cs, "", MetricDelayCut)
	if c.Configurations != 12 || c.Null != 0 {
		t.Fatalf("configurations %d null %v, want 12 and 0", c.Configurations, c.Null)
	}
	if !(c.Lo > 0 && c.Lo < c.Estimate && c.Estimate < c.Hi) {
		t.Fatalf("cut %v [%v, %v]: want an interval above 0 around the estimate", c.Estimate, c.Lo, c.Hi)
	}
	if math.Abs(c.Estimate-20) > 3 {
		t.Fatalf("cut %v, want about 20 %%", c.Estimate)
	}
	if c.Verdict != VerdictQUICBetter || c.SmallN {
		t.Fatalf("verdict %q small n %v, want %q and false", c.Verdict, c.SmallN, VerdictQUICBetter)
	}
}

func TestComparisonCIIncludesNullWithoutADifference(t *testing.T) {
	cs := comparisons(synthCells(12, 1.0, 0.3, 2), nil, nil, 1, 2000)
	c := findCmp(t, cs, "", MetricDelayCut)
	if !(c.Lo < 0 && c.Hi > 0) {
		t.Fatalf("cut %v [%v, %v]: want an interval that includes 0", c.Estimate, c.Lo, c.Hi)
	}
	if c.Verdict != VerdictNoDifference {
		t.Fatalf("verdict %q, want %q", c.Verdict, VerdictNoDifference)
	}
	if got := comparisonSentence(c); !contains(got, "no difference") {
		t.Fatalf("sentence %q does not say no difference", got)
	}
}

func TestComparisonWorseQUICIsWhereQUICLoses(t *testing.T) {
	cells := synthCells(8, 1.25, 0.05, 3)
	cs := comparisons(cells, nil, nil, 7, 1000)
	c := findCmp(t, cs, "", MetricDelayCut)
	if c.Verdict != VerdictQUICWorse || !(c.Hi < 0) {
		t.Fatalf("cut %v [%v, %v] verdict %q: want an interval below 0, QUIC worse", c.Estimate, c.Lo, c.Hi, c.Verdict)
	}
	s := &Summary{Comparisons: cs, Manifest: map[string]string{"fabric": "local"}}
	words := plainWords(s)
	if !contains(words[0], "Not emulated") {
		t.Fatalf("a local-fabric run must say it is not emulated first, got %q", words[0])
	}
	found := false
	for _, w := range words {
		if contains(w, "Where QUIC loses") && contains(w, "mean one-way delay") {
			found = true
		}
	}
	if !found {
		t.Fatalf("plain words do not name where QUIC loses: %q", words)
	}
	again := comparisons(cells, nil, nil, 7, 1000)
	if a, b := findCmp(t, again, "", MetricDelayCut), c; a.Lo != b.Lo || a.Hi != b.Hi {
		t.Fatalf("same seed gave [%v, %v] and [%v, %v]: the report is not reproducible", a.Lo, a.Hi, b.Lo, b.Hi)
	}
}

func TestComparisonXiCountsConfigurationCIs(t *testing.T) {
	var cells []*CellResult
	var xi []*XiResult
	for i, f := range []float64{1.1, 1.2, 0.9} {
		tc := &CellResult{Cell: "t" + string(rune('a'+i)), Experiment: "E4", Profile: "wifi", LossPct: 0, Transport: "mqtts",
			Pattern: records.PatternStopAndWait, Kind: KindA, Size: i, CompletionS: stats.Summary{N: 10, Mean: 3}}
		qc := *tc
		qc.Cell, qc.Transport, qc.CompletionS.Mean = "q"+tc.Cell[1:], "quic", 3*f
		cells = append(cells, tc, &qc)
		lo, hi := f-0.05, f+0.05
		xi = append(xi, &XiResult{TCPCell: tc.Cell, QUICCell: qc.Cell, OfMeans: stats.Interval{Estimate: f, Lo: lo, Hi: hi}})
	}
	c := findCmp(t, comparisons(cells, xi, nil, 1, 500), "", MetricXi)
	if c.CIsAbove != 2 || c.CIsBelow != 1 || c.Null != 1 || !c.SmallN {
		t.Fatalf("above %d below %d null %v small %v, want 2, 1, 1, true", c.CIsAbove, c.CIsBelow, c.Null, c.SmallN)
	}
}

func TestComparisonOfOneConfigurationResamplesItsValues(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	tc := &CellResult{Cell: "t", Experiment: "E1", Profile: "wifi", LossPct: 5, Transport: "mqtts", Pattern: records.PatternPeriodic, Kind: KindPeriodic}
	qc := *tc
	qc.Cell, qc.Transport = "q", "quic"
	for range 500 {
		tc.delays = append(tc.delays, 40+10*rng.Float64())
		qc.delays = append(qc.delays, 30+10*rng.Float64())
	}
	tc.DelayMs, qc.DelayMs = stats.Summarize(tc.delays), stats.Summarize(qc.delays)
	c := findCmp(t, comparisons([]*CellResult{tc, &qc}, nil, nil, 1, 1000), "", MetricDelayCut)
	if !c.Within || c.SmallN || !(c.Lo > 15 && c.Hi < 30) || c.Verdict != VerdictQUICBetter {
		t.Fatalf("within %v small %v cut %v [%v, %v] %q: want a CI over the messages around 22 %%", c.Within, c.SmallN, c.Estimate, c.Lo, c.Hi, c.Verdict)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestLocalFabricSaysNotEmulated: a run on the local fabric (loopback, no
// link emulated) says so first in its plain words and in its notes,
// instead of reading like a wifi run with loss.
func TestLocalFabricSaysNotEmulated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "results")
	os.MkdirAll(dir, 0o755)
	writeFixture(t, dir)
	path := filepath.Join(dir, "manifest.json")
	var m map[string]any
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["fabric"] = "local"
	b, _ = json.Marshal(m)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, out := generate(t, dir, Options{NoFigures: true})
	md, err := os.ReadFile(filepath.Join(out, FileMarkdown))
	if err != nil {
		t.Fatal(err)
	}
	plain := strings.Index(string(md), "## Results in plain words")
	first := strings.Index(string(md), "- **Not emulated.**")
	if plain < 0 || first < 0 || first < plain || strings.Index(string(md), "## Run") < first {
		t.Fatalf("report.md does not open with the not-emulated line:\n%s", md[:min(len(md), 600)])
	}
	found := false
	for _, n := range s.Notes {
		found = found || strings.Contains(n, "no link was emulated")
	}
	if !found {
		t.Fatalf("notes %q do not say the run was not emulated", s.Notes)
	}
}

// TestPerConfigurationCI: each configuration's own delay comparison,
// its messages resampled; equal cells give an interval around 0.
func TestPerConfigurationCI(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	mk := func(id, tr string, base float64) *CellResult {
		c := &CellResult{Cell: id, Experiment: "E1", Profile: "wifi", LossPct: 5, Transport: tr, Pattern: records.PatternPeriodic, Kind: KindPeriodic, Size: 100}
		for range 400 {
			c.delays = append(c.delays, base+10*rng.Float64())
		}
		c.DelayMs = stats.Summarize(c.delays)
		return c
	}
	cells := []*CellResult{mk("t1", "mqtts", 40), mk("q1", "quic", 30), mk("t2", "mqtts", 30)}
	c2 := mk("q2", "quic", 30)
	c2.Size, cells[2].Size = 200, 200
	cells = append(cells, c2)
	per := perConfiguration(cells, 1, 1000)
	if len(per) != 2 {
		t.Fatalf("%d per-configuration comparisons, want 2", len(per))
	}
	if per[0].TCPCell != "t1" || per[0].Verdict != VerdictQUICBetter || !(per[0].Lo > 15) {
		t.Errorf("first %+v: want t1, QUIC better, CI above 15 %%", per[0])
	}
	if per[1].Verdict != VerdictNoDifference || !(per[1].Lo < 0 && per[1].Hi > 0) {
		t.Errorf("second %+v: want no difference, CI around 0", per[1])
	}
}

// TestComparisonOfBatchCommunicationTime: E8's communication time is
// compared over the batch and batch-resume cells, where QUIC takes 0.6 of
// TCP's time here; batch-echo cells (QUIC twice as slow in this fixture)
// are left out, since their echo traffic shares the links.
func TestComparisonOfBatchCommunicationTime(t *testing.T) {
	var cells []*CellResult
	var batch []*BatchResult
	for i, prof := range []string{"wifi", "cellular", "satellite"} {
		for _, pat := range []string{records.PatternBatch, records.PatternBatchResume, records.PatternBatchEcho} {
			factor := 0.6 * (1 + 0.02*float64(i))
			if pat == records.PatternBatchEcho {
				factor = 2
			}
			for _, tr := range []string{"amqps", "amqp+quic"} {
				id := prof + pat + tr
				cells = append(cells, &CellResult{Cell: id, Experiment: "E8", Profile: prof, LossPct: 5, Transport: tr, QoS: 1,
					Pattern: pat, Size: 100, protocol: records.ProtocolAMQP})
				comm := 2.0 * float64(i+1)
				if tr != "amqps" {
					comm *= factor
				}
				batch = append(batch, &BatchResult{Cell: id, Experiment: "E8", Profile: prof, LossPct: 5, Pattern: pat,
					CommS: stats.Summary{N: 20, Mean: comm}, CommDegradation: math.NaN()})
			}
		}
	}
	c := findCmp(t, comparisons(cells, nil, batch, 1, 1000), "", MetricCommCut)
	if c.Configurations != 6 {
		t.Fatalf("%d configurations, want 6 (batch and batch-resume on 3 profiles, batch-echo left out)", c.Configurations)
	}
	if math.Abs(c.Estimate-38) > 2 || c.Verdict != VerdictQUICBetter {
		t.Fatalf("cut %v [%v, %v] verdict %q: want about 38 %% and QUIC better", c.Estimate, c.Lo, c.Hi, c.Verdict)
	}
	if got := comparisonSentence(c); !strings.Contains(got, "communication time of a batch") || !strings.Contains(got, " s against ") {
		t.Fatalf("sentence %q does not name the metric and both sides in seconds", got)
	}
}
