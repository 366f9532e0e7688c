package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/help")

// TestHelpGolden: `iotq help` and `iotq help CMD` for every command match
// the committed golden files, so help cannot drift unnoticed (cmd/go's
// TestDocsUpToDate). Run `go test ./cmd/iotq -run TestHelpGolden -update`
// after a deliberate change and review the diff.
func TestHelpGolden(t *testing.T) {
	cases := map[string][]string{"iotq": {"help"}}
	for _, c := range newApp(nil, nil).commands {
		cases[c.Name] = []string{"help", c.Name}
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := newApp(&out, &errb).run(context.Background(), args); code != exitOK || errb.Len() > 0 {
				t.Fatalf("iotq %v: exit %d, stderr %q", args, code, errb.String())
			}
			golden := filepath.Join("testdata", "help", name+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (create it with: go test ./cmd/iotq -run TestHelpGolden -update)", err)
			}
			if !bytes.Equal(out.Bytes(), want) {
				t.Errorf("iotq %v differs from %s (if intended, rerun with -update and review the diff)\n--- got\n%s", args, golden, out.String())
			}
		})
	}
}

// TestHelpFlagsOfEveryCommand: every command's flags are documented in
// --help output as in `iotq help CMD`, and -h exits 0.
func TestHelpFlag(t *testing.T) {
	for _, c := range newApp(nil, nil).commands {
		var a, b bytes.Buffer
		newApp(&a, &bytes.Buffer{}).run(context.Background(), []string{"help", c.Name})
		if code := newApp(&b, &bytes.Buffer{}).run(context.Background(), []string{c.Name, "-h"}); code != exitOK {
			t.Errorf("iotq %s -h: exit %d, want 0", c.Name, code)
		}
		if a.String() != b.String() {
			t.Errorf("iotq %s -h differs from iotq help %s", c.Name, c.Name)
		}
	}
}
