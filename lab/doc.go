// Package lab runs iotq's experiments end to end: scenarios, campaigns,
// traffic patterns, node processes and record collection.
//
// # Pieces
//
//   - Spec (spec.go): one experiment as written in a scenario YAML file
//     (one Spec per YAML document) or built in (smoke, E1-E9, E11). Every field
//     has a documented zero-value default; Validate reports all problems at
//     once with field paths, ParseSpecs (internal/yamlconf, the broker's
//     configuration format) adds file and line. Spec.Scaled applies
//     --scale (message counts, intervals, repetitions only).
//   - Cells (cells.go): the deterministic expansion of specs into cells,
//     each one combination of link, transport and traffic parameters, with
//     a stable id that names its directory. Shard picks every n-th cell.
//   - Run (campaign.go): runs the cells into a results directory through a
//     CellRunner, up to Options.Jobs at once (fewer when the timing guard's
//     admission control says so; admission.go, timing.go), writes a done
//     marker per finished cell, rebuilds the aggregate CSV files from
//     completed cells, resumes and merges shards (Merge). Independent of
//     how cells are run, so it is tested without root.
//   - ProcRunner (runner.go): the real CellRunner. For each cell it builds
//     the topology through a Fabric (package link's namespaces and emulated
//     links, or LocalFabric on loopback), starts `iotq broker`, `iotq sub`
//     and `iotq pub` as child processes in their nodes' namespaces, drives
//     the traffic pattern and turns their record files into the lab's.
//     Experiment-specific patterns live in files of their own: E9's
//     multi-topic (e9.go: one publisher connection, several topics and a
//     large-message topic), E11's failover (e11.go).
//
// Result files are described in docs/records.md and docs/lab.md.
//
// # Concurrency
//
// Run runs each cell in a goroutine of its own, at most Options.Jobs at
// once (1: one after another) and fewer when the timing guard lowers the
// limit; Run's own goroutine alone writes the done markers, the progress
// bar, the manifest and the aggregate files, and it waits for every cell's
// goroutine before it returns. The CellRunner must therefore be safe for
// concurrent use when Jobs > 1: ProcRunner is (it keeps only its read-only
// options; each RunCell builds its own namespaces through the Fabric, and
// LinkFabric, LocalFabric and TimingGuard are safe for concurrent use).
// Cells share the host's CPU, not a link: that is why the guard measures
// how late processes wake and bounds the cells at once. A ProcRunner
// starts goroutines only inside RunCell (to relay the subscriber's
// notifications to the publisher, and to wait for child processes) and
// stops them before RunCell returns; every child process is killed and
// waited for on return, also when the context is cancelled. Specs and
// Cells are plain values. No package-level mutable state.
//
// # Imports
//
// lab may import link, transport, internal/...; it never imports broker or
// client (those run as child processes) nor report.
package lab
