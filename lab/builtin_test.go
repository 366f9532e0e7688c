package lab

import (
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/builtin-cells.golden")

func ms(n int) Duration { return Duration(time.Duration(n) * time.Millisecond) }

// builtinSpec is the one experiment of the built-in scenario name.
func builtinSpec(t *testing.T, name string) Spec {
	t.Helper()
	s, ok := Builtin(name)
	if !ok || len(s) != 1 {
		t.Fatalf("built-in %s: %d experiments, want one", name, len(s))
	}
	return s[0]
}

// TestBuiltinScenariosParse: every embedded scenario file parses (builtin
// panics on one that does not) and names a distinct scenario.
func TestBuiltinScenariosParse(t *testing.T) {
	entries, err := builtinFS.ReadDir("scenarios")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, _ := builtinFS.ReadFile("scenarios/" + e.Name())
		for i, doc := range strings.Split(string(data), "\n---\n") {
			if _, err := ParseSpecs(e.Name(), []byte(doc)); err != nil {
				t.Errorf("%s, document %d: %v", e.Name(), i+1, err)
			}
		}
	}
	if n := len(BuiltinNames()); n != len(entries) {
		t.Errorf("%d files, %d built-in names", len(entries), n)
	}
}

// TestBuiltinCellsPinned pins every built-in scenario's cells at each
// scale (count and a hash of the cells with all their parameters): a
// change to a scenario file that changes a cell, its id or its seed shows
// here. Cell ids must stay stable (resume, merge, pool and published
// evidence name them): if the change is meant, run with -update and
// compare `iotq lab show NAME --scale S` before and after.
func TestBuiltinCellsPinned(t *testing.T) {
	var b strings.Builder
	for _, name := range BuiltinNames() {
		specs, _ := Builtin(name)
		for _, scale := range []string{ScaleFull, ScaleReduced, ScaleSmoke} {
			var scaled []Spec
			for _, s := range specs {
				sc, err := s.Scaled(scale)
				if err != nil {
					t.Fatal(err)
				}
				scaled = append(scaled, sc)
			}
			cells, err := Cells(scaled)
			if err != nil {
				t.Fatalf("%s at %s: %v", name, scale, err)
			}
			j, err := json.Marshal(cells)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s %s %d cells sha256:%x\n", name, scale, len(cells), sha256.Sum256(j))
		}
	}
	path := filepath.Join("testdata", "builtin-cells.golden")
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		t.Errorf("the built-in scenarios' cells changed (-update rewrites %s):\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var out []string
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			out = append(out, "- "+l)
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if !w[l] {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}
