package lab

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
)

// builtinFS holds the built-in scenarios, one YAML file each
// (scenarios/NAME.yaml, one document per experiment), in the format of
// scenario files (docs/lab.md, "Scenario files"): what a user copies to
// change one is what the lab runs.
//
//go:embed scenarios/*.yaml
var builtinFS embed.FS

// builtin returns the built-in scenarios by lower-case name, parsed anew
// (each a fresh value; callers may modify it). The files are part of the
// program, so one that does not parse is a bug of this build:
// TestBuiltinScenariosParse fails on it before a release could.
func builtin() map[string][]Spec {
	entries, err := fs.ReadDir(builtinFS, "scenarios")
	if err != nil {
		panic(fmt.Sprintf("built-in scenarios: %v", err))
	}
	out := make(map[string][]Spec, len(entries))
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".yaml")
		if !ok {
			continue
		}
		data, err := builtinFS.ReadFile("scenarios/" + e.Name())
		if err != nil {
			panic(fmt.Sprintf("built-in scenario %s: %v", name, err))
		}
		// parseSpecs, not ParseSpecs: a built-in may hold several documents
		// of one experiment (E5 and its early variant, the smoke run's
		// three patterns), which a user's file may not.
		specs, err := parseSpecs("lab/scenarios/"+e.Name(), data)
		if err != nil {
			panic(fmt.Sprintf("built-in scenario %s: %v", name, err))
		}
		out[name] = specs
	}
	return out
}

// BuiltinNames lists the built-in scenarios.
func BuiltinNames() []string {
	var n []string
	for k := range builtin() {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// Builtin returns a built-in scenario by name (case-insensitive).
func Builtin(name string) ([]Spec, bool) {
	s, ok := builtin()[strings.ToLower(name)]
	return s, ok
}

// Resolve returns the scenario named by arg: a built-in name, or else a
// YAML file path.
func Resolve(arg string) ([]Spec, error) {
	if s, ok := Builtin(arg); ok {
		return s, nil
	}
	if _, err := os.Stat(arg); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w %q: neither a built-in name (%s) nor an existing YAML file", ErrUnknownScenario, arg, strings.Join(BuiltinNames(), ", "))
	}
	specs, err := LoadSpecs(arg)
	if err != nil {
		return nil, err
	}
	return specs, nil
}
