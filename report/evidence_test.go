package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEvidenceIndexIsUpToDate fails when the generated section of
// evidence/README.md differs from what the campaigns' own files generate:
// the prose cannot drift from the data unnoticed.
func TestEvidenceIndexIsUpToDate(t *testing.T) {
	dir := filepath.Join("..", "evidence")
	readme, err := os.ReadFile(filepath.Join(dir, FileEvidenceIndex))
	if err != nil {
		t.Fatal(err)
	}
	sec, err := EvidenceIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ReplaceEvidenceSection(readme, sec)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readme, want) {
		got, exp := strings.Split(string(readme), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(got), len(exp)) {
			if got[i] != exp[i] {
				t.Fatalf("evidence/README.md's generated section is stale (run `iotq report --evidence-index evidence`); line %d:\n- %s\n+ %s", i+1, got[i], exp[i])
			}
		}
		t.Fatalf("evidence/README.md's generated section is stale (run `iotq report --evidence-index evidence`): %d lines, want %d", len(got), len(exp))
	}
	for _, must := range []string{"| [e2-full](e2-full/report.md) |", "load 4.35 at the start", "worst cell 77.50 ms", "ran at the same time as e5-full"} {
		if !bytes.Contains(sec, []byte(must)) {
			t.Errorf("generated section lacks %q", must)
		}
	}
}

// TestEvidenceIndexFollowsTheData changes a campaign's manifest in a copy
// and checks that the section changes with it, and that a README without
// markers is refused with a message naming them.
func TestEvidenceIndexFollowsTheData(t *testing.T) {
	src := filepath.Join("..", "evidence", "e6-control-r50")
	dir := t.TempDir()
	dst := filepath.Join(dir, "c1")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"manifest.json", FileSummary, FileTables} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "manifest.json" {
			b = bytes.Replace(b, []byte(`"loadavg_start": "1.48`), []byte(`"loadavg_start": "9.75`), 1)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	readme := filepath.Join(dir, FileEvidenceIndex)
	if err := os.WriteFile(readme, []byte("# x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := UpdateEvidenceIndex(dir); err == nil || !strings.Contains(err.Error(), "BEGIN GENERATED") {
		t.Fatalf("README without markers: err %v, want one naming the markers", err)
	}
	if err := os.WriteFile(readme, []byte("# x\n\n"+EvidenceBegin+"\nstale\n"+EvidenceEnd+"\n\nprose\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	changed, err := UpdateEvidenceIndex(dir)
	if err != nil || !changed {
		t.Fatalf("changed %v err %v, want a change", changed, err)
	}
	b, _ := os.ReadFile(readme)
	for _, must := range []string{"load 9.75 at the start", "xi 1.020 (QUIC/TCP, 95 % CI [1.015, 1.026])", "\nprose\n"} {
		if !bytes.Contains(b, []byte(must)) {
			t.Errorf("README lacks %q:\n%s", must, b)
		}
	}
	if bytes.Contains(b, []byte("stale")) {
		t.Errorf("the old section stayed")
	}
	if changed, err := UpdateEvidenceIndex(dir); err != nil || changed {
		t.Fatalf("second run: changed %v err %v, want no change", changed, err)
	}
}
