package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReportCommandExitCodes runs `iotq report` in-process on the report
// package's committed fixture.
func TestReportCommandExitCodes(t *testing.T) {
	fixture := filepath.Join("..", "..", "report", "testdata", "results")
	if _, err := os.Stat(filepath.Join(fixture, "cells.csv")); err != nil {
		t.Fatalf("fixture missing: %v", err)
	}
	out := filepath.Join(t.TempDir(), "rep")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"a results directory with flags after it", []string{"report", fixture, "--out", out, "--no-figures"}, exitOK, "report.md"},
		{"no directory", []string{"report"}, exitUsage, "missing results directory"},
		{"two directories", []string{"report", fixture, "other"}, exitUsage, "unexpected argument"},
		{"bad resamples", []string{"report", "--resamples", "0", fixture}, exitUsage, "--resamples"},
		{"not a results directory", []string{"report", t.TempDir()}, exitFailure, "not a results directory"},
		// Result files without one readable cell: exit 1, not an empty
		// report a script would take for a result (issue 22 item 2).
		{"a manifest only", []string{"report", resultsWith(t, "manifest.json", `{"seed": 3}`), "--no-figures"}, exitFailure, "no readable cells (files read: manifest.json)"},
		{"an unreadable cells.csv", []string{"report", resultsWith(t, "cells.csv", "garbage,stuff\n"), "--no-figures"}, exitFailure, "no readable cells"},
		{"messages.csv header only", []string{"report", resultsWith(t, "messages.csv", "cell,seq\n"), "--no-figures"}, exitFailure, "Expected the results directory of `iotq lab run --out DIR`"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var so, se bytes.Buffer
			code := newApp(&so, &se).run(context.Background(), c.args)
			if code != c.code || !strings.Contains(so.String()+se.String(), c.want) {
				t.Errorf("exit %d (want %d)\nstdout: %s\nstderr: %s", code, c.code, so.String(), se.String())
			}
		})
	}
	if _, err := os.Stat(filepath.Join(out, "tables.csv")); err != nil {
		t.Errorf("tables.csv not written: %v", err)
	}
}

// resultsWith returns a new directory holding one file.
func resultsWith(t *testing.T, name, content string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}
