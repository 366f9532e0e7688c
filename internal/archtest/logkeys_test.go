package archtest

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// errKey finds a log attribute keyed "err": the module logs errors under
// "error", as the MQTT engine it owns does, so one query finds them in
// every component's log (issue 22: the broker said "error", the gateway
// and the lab "err").
var errKey = regexp.MustCompile(`"err",\s`)

func TestLogErrorsUnderOneKey(t *testing.T) {
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n != ".." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "results" || n == "evidence") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if errKey.MatchString(line) {
				t.Errorf("%s:%d: log attribute \"err\": use \"error\" (%s)", path, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
