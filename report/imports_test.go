package report

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestReadsOnlyResultFiles enforces the package contract: report and its
// sub-packages import neither lab, broker, link (the emulator), client nor
// transport; link/profile (the profile table and units, standard library
// only) is allowed.
func TestReadsOnlyResultFiles(t *testing.T) {
	forbidden := []string{"/lab", "/broker", "/link", "/client", "/transport"}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == "github.com/iotq/iotq/link/profile" {
				continue
			}
			for _, bad := range forbidden {
				if strings.HasPrefix(p, "github.com/iotq/iotq"+bad) {
					t.Errorf("%s imports %s: report reads result files only", path, p)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
