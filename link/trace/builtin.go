package trace

import (
	"embed"
	"fmt"
	"sort"
	"strings"
	"time"
)

//go:generate go run ./gen

// The shipped traces: generated from these models by `go generate
// ./link/trace`, written to data/NAME.trace; TestShippedTracesMatchModels
// keeps the files equal to what the models give.
//
//go:embed data/*.trace
var shipped embed.FS

// Models returns the models of the shipped traces.
func Models() []Model {
	return []Model{
		{
			// An LTE-like link around the cellular profile's 10 Mbit/s.
			Name:        "cellular-lte",
			Duration:    60 * time.Second,
			MedianRate:  10_000_000,
			Sigma:       0.6,
			Corr:        2 * time.Second,
			Step:        10 * time.Millisecond,
			MinRate:     500_000,
			MaxRate:     40_000_000,
			Slot:        time.Millisecond,
			OutageEvery: 20 * time.Second,
			OutageMean:  300 * time.Millisecond,
			MTU:         1500,
			Seed:        1,
		},
	}
}

// Names lists the shipped traces.
func Names() []string {
	var out []string
	for _, m := range Models() {
		out = append(out, m.Name)
	}
	sort.Strings(out)
	return out
}

// ByName returns the shipped trace called name.
func ByName(name string) (*Trace, error) {
	for _, m := range Models() {
		if m.Name != name {
			continue
		}
		f, err := shipped.Open("data/" + name + ".trace")
		if err != nil {
			return nil, fmt.Errorf("trace %s: %w (run go generate ./link/trace)", name, err)
		}
		defer f.Close()
		return Parse(name, f)
	}
	return nil, fmt.Errorf("trace %q: no such built-in trace; want one of %s, or a file", name, strings.Join(Names(), ", "))
}
