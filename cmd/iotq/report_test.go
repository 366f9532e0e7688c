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
