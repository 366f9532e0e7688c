package archtest

import (
	"slices"
	"testing"
)

// TestEngineBehindItsInterface: the MQTT engine (internal/mqttcore, the
// mochi fork) is reached only through its adapter broker/mochi, which
// implements the neutral contract of broker/engine; package broker itself
// never sees the engine's types, so replacing the engine touches one
// package. broker/engine depends on nothing in the module.
func TestEngineBehindItsInterface(t *testing.T) {
	const core, adapter, contract = "internal/mqttcore", "broker/mochi", "broker/engine"
	found := false
	for _, p := range list(t) {
		if p.ImportPath == adapter {
			found = true
		}
		if p.ImportPath == contract && len(p.Imports) > 0 {
			t.Errorf("%s imports %v: the engine contract must stand alone", contract, p.Imports)
		}
		for _, imp := range p.Imports {
			if within(imp, core) && !within(p.ImportPath, core) && p.ImportPath != adapter {
				t.Errorf("%s imports %s: only %s may use the engine's own types", p.ImportPath, imp, adapter)
			}
			if imp == adapter && !slices.Contains([]string{"broker"}, p.ImportPath) {
				t.Errorf("%s imports %s: only package broker builds the engine", p.ImportPath, imp)
			}
		}
	}
	if !found {
		t.Fatalf("package %s not found: update this test if the engine adapter moved", adapter)
	}
}
