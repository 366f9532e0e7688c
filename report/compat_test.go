package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOldLabDirectoryGolden pins the report of a results directory that the
// lab wrote before the record contracts moved into package records
// (testdata/lab-v0: a real `iotq lab run` of two E1 periodic cells and four
// E4 stop-and-wait / reconnect cells, with the raw node files and logs left
// out). The report of such a directory must not change: regenerate the
// golden files with -update only for an intended change of the report.
func TestOldLabDirectoryGolden(t *testing.T) {
	dir := filepath.Join("testdata", "lab-v0")
	_, out := generate(t, dir, Options{NoFigures: true})
	for _, f := range []string{FileMarkdown, FileTables, FileSummary} {
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		// the output directory is a temporary one: name it alike every run
		s := strings.ReplaceAll(string(b), out, "OUT")
		golden(t, "lab-v0."+f, []byte(s))
	}
}

// TestDefaultLinkFromProfileTable: without link columns the bounds use the
// profile table, read under the cell's delay convention.
func TestDefaultLinkFromProfileTable(t *testing.T) {
	if l := defaultLink("wifi", "rtt"); l.PubDelayNs != 12_500_000 || l.PubRateBps != 20e6 || l.SubRateBps != 100e6 || l.SubDelayNs != 0 {
		t.Errorf("wifi rtt: %+v", l)
	}
	if l := defaultLink("cellular", ""); l.PubDelayNs != 100_000_000 || l.PubRateBps != 10e6 {
		t.Errorf("cellular one-way: %+v", l)
	}
	if l := defaultLink("lte-advanced", ""); l.Source != "" {
		t.Errorf("unknown profile: %+v", l)
	}
}
