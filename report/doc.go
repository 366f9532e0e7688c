// Package report turns a lab results directory into statistics, figures
// (PNG and SVG, drawn with gonum.org/v1/plot through package figplot; what
// each experiment's figures show is decided here), one self-contained HTML page,
// a Markdown summary and machine-readable tables (tables.csv,
// summary.json).
//
// It reads only the result files described in docs/records.md
// (manifest.json, cells.csv, messages.csv, connections.csv, links.csv,
// cpu.csv, completions.csv, cells/CELL/done.json, cells/CELL/pub.pcap and
// E11's cells/CELL/rep-N/e11.csv),
// through the types of package records; it never imports lab, broker or
// the link emulator (only link/profile, the profile table and units).
// Percentiles are type 7 (internal/stats). Every file is optional: a missing or unreadable file
// skips the tables and figures that need it and leaves a note in the
// report. A directory holding none of the files is rejected with
// ErrNotResults.
//
// Headline comparisons of TCP and QUIC (compare.go) carry percentile
// bootstrap intervals over the configurations (internal/stats.Bootstrap,
// the one home of the bootstrap) and open the report in plain words.
// EvidenceIndex (evidence.go) computes the same comparisons from published
// campaigns (their manifest.json, tables.csv and summary.json) and writes
// the generated section of evidence/README.md.
//
// Output is deterministic: rows are sorted, the bootstrap uses a fixed
// seed, no absolute path or wall-clock time is written, so the same input
// always gives byte-identical Markdown, CSV and JSON.
//
// Generate runs on the calling goroutine and starts none; concurrent calls
// with different output directories are safe.
package report
