package figplot

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestKnowsNothingOfRecords enforces the package contract: of this module
// it imports internal/stats (the box statistics) only, never records or
// report, so that what a figure shows stays in package report.
func TestKnowsNothingOfRecords(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files (%v)", err)
	}
	for _, path := range files {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, "github.com/iotq/iotq") && p != "github.com/iotq/iotq/internal/stats" {
				t.Errorf("%s imports %s: figplot draws, it knows nothing of experiments or records", path, p)
			}
		}
	}
}
