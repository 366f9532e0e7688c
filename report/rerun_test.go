package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyCampaign copies the files the index reads from evidence/NAME into
// dir/as, through edit.
func copyCampaign(t *testing.T, name, dir, as string, edit func(file string, b []byte) []byte) {
	t.Helper()
	dst := filepath.Join(dir, as)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"manifest.json", FileSummary, FileTables} {
		b, err := os.ReadFile(filepath.Join("..", "evidence", name, f))
		if err != nil {
			t.Fatal(err)
		}
		if edit != nil {
			b = edit(f, b)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRerunSectionComparesSharedCells: e2-full (blind probe, egress and
// both directions) against its egress re-run under the fixed guard is
// compared on the 108 egress cells only (45 lossy configurations, not
// e2-full's 90); a re-run that shares no cell id is left out.
func TestRerunSectionComparesSharedCells(t *testing.T) {
	dir := t.TempDir()
	copyCampaign(t, "e2-full", dir, "a-old", nil)
	copyCampaign(t, "e2-egress-full", dir, "b-new", nil)
	copyCampaign(t, "e2-egress-full", dir, "c-other", func(f string, b []byte) []byte {
		if f == FileSummary {
			return bytes.ReplaceAll(b, []byte(`"E2_`), []byte(`"X2_`))
		}
		return b
	})
	sec, err := EvidenceIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := string(sec)
	for _, must := range []string{
		"### Re-runs under the fixed guard: before and after",
		"**a-old** (blind probe) against **b-new** (fixed guard), 108 cells in common:",
		"| E2 | MQTT |  | with loss | delay cut % | 45 | QUIC better: ",
	} {
		if !strings.Contains(s, must) {
			t.Errorf("section lacks %q:\n%s", must, s)
		}
	}
	if strings.Contains(s, "against **c-other**") {
		t.Errorf("a campaign with no cell in common was compared")
	}
	if strings.Contains(s, "(blind probe) against **a-old**") {
		t.Errorf("a blind campaign was taken as a re-run")
	}
}
