// Package archtest holds the import-rule test of the module: the arrows
// of the architecture (docs/architecture.md), checked on every package's
// imports as `go list` reports them. It has no code of its own.
//
//	cmd -> lab -> {client, broker, gateway, link} -> transport -> internal
//	records sits low beside internal; report reads result files through
//	records only (never broker, lab or link, apart from an import-light
//	link/units or link/profile subpackage).
//
// A package may import its own area (client/mqtt imports client/internal/
// core) and the areas its rule lists. Test helpers (internal/testutil,
// broker/brokertest, client/contracttest) are imported by tests only. A new top-level area gets
// a rule in rules() when it is added.
package archtest
