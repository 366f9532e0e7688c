package scripts

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// checkedMarker opts a docs/bench README in: every ratio (1.07x), CPU per
// message (5.53 us) and latency (2.00 ms) it quotes with two decimals must
// be a value of the summary.json beside it, rounded as quoted.
const checkedMarker = "checked against summary.json by scripts/benchdocs_test.go"

var quoted = regexp.MustCompile(`(\d+\.\d\d)(x| us| ms)\b`)

// TestBenchReadmesQuoteTheirSummary: the prose of an opted-in benchmark
// README is held to the data the script wrote.
func TestBenchReadmesQuoteTheirSummary(t *testing.T) {
	readmes, err := filepath.Glob("../docs/bench/*/README.md")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, readme := range readmes {
		raw, err := os.ReadFile(readme)
		if err != nil {
			t.Fatal(err)
		}
		// Line breaks fall anywhere in prose: inside the marker, or
		// between a number and its unit.
		text := strings.Join(strings.Fields(string(raw)), " ")
		if !strings.Contains(text, checkedMarker) {
			continue
		}
		checked++
		js, err := os.ReadFile(filepath.Join(filepath.Dir(readme), "summary.json"))
		if err != nil {
			t.Fatalf("%s opts in but has no summary.json: %v", readme, err)
		}
		var summary any
		if err := json.Unmarshal(js, &summary); err != nil {
			t.Fatalf("%s: summary.json: %v", readme, err)
		}
		values := map[string]bool{}
		collectNumbers(summary, values)
		for _, m := range quoted.FindAllStringSubmatch(text, -1) {
			if !values[m[1]+m[2]] {
				t.Errorf("%s quotes %s%s, which is no value of its summary.json (rounded to two decimals)", readme, m[1], m[2])
			}
		}
	}
	if checked == 0 {
		t.Fatalf("no README under docs/bench says %q", checkedMarker)
	}
}

// collectNumbers records every number in v as it may be quoted: a ratio
// ("1.07x"), microseconds ("5.53 us") and, for microsecond latencies, the
// milliseconds ("2.00 ms").
func collectNumbers(v any, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			collectNumbers(e, out)
		}
	case []any:
		for _, e := range v {
			collectNumbers(e, out)
		}
	case float64:
		r := func(x float64) string { return strconv.FormatFloat(math.Round(x*100)/100, 'f', 2, 64) }
		out[r(v)+"x"] = true
		out[r(v)+" us"] = true
		out[r(v/1000)+" ms"] = true
	case string:
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			collectNumbers(f, out)
		}
	}
}
