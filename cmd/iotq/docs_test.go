package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsLinksResolveInRepo checks that every relative link of the README,
// docs/*.md and the published reports in evidence/, and every docs/ file `iotq help` names, exists in the
// repository: a fresh clone must stand alone (no links to ../shared).
func TestDocsLinksResolveInRepo(t *testing.T) {
	root := filepath.Join("..", "..")
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"), filepath.Join(root, "evidence", "README.md"))
	published, err := filepath.Glob(filepath.Join(root, "evidence", "*", "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, published...)
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("shared/docs")) {
			t.Errorf("%s refers to shared/docs, outside the repository", f)
		}
		for _, m := range link.FindAllSubmatch(b, -1) {
			target := string(m[1])
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			p := filepath.Clean(filepath.Join(filepath.Dir(f), target))
			if rel, err := filepath.Rel(root, p); err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s: link %q points outside the repository", f, m[1])
				continue
			}
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s: link %q does not resolve: %v", f, m[1], err)
			}
			checked++
		}
	}
	if checked < 5 {
		t.Fatalf("only %d links checked; the pattern is broken", checked)
	}
	// Every docs/NAME.md the help texts mention exists.
	a := newApp(&bytes.Buffer{}, &bytes.Buffer{})
	docRef := regexp.MustCompile(`docs/[A-Za-z0-9_.-]+\.md`)
	for _, c := range a.commands {
		var out bytes.Buffer
		newApp(&out, &out).run(context.Background(), []string{"help", c.Name})
		for _, ref := range docRef.FindAllString(out.String(), -1) {
			if _, err := os.Stat(filepath.Join(root, ref)); err != nil {
				t.Errorf("iotq help %s names %s, which is not in the repository", c.Name, ref)
			}
		}
		if strings.Contains(out.String(), "shared/docs") {
			t.Errorf("iotq help %s refers to shared/docs", c.Name)
		}
	}
}
