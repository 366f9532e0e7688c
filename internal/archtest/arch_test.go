package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/iotq/iotq"

// rules maps each top-level area of the module to the other areas its
// non-test code may import. Paths are relative to the module.
func rules() map[string][]string {
	return map[string][]string{
		"internal":  {},
		"records":   {"internal"},
		"transport": {"internal"},
		"client":    {"transport", "internal", "records"},
		"broker":    {"transport", "internal", "records"},
		"gateway":   {"transport", "internal", "records"},
		"link":      {"internal", "records"},
		"lab":       {"client", "broker", "gateway", "link", "transport", "internal", "records"},
		"report":    {"records", "internal", "link/units", "link/profile"},
		"cmd":       {"*"},
		"scripts":   {}, // tests of the shell scripts only
	}
}

// testOnly are packages that only tests (and other test helpers) import.
func testOnly() []string {
	return []string{"internal/testutil", "broker/brokertest", "client/contracttest"}
}

type pkg struct {
	ImportPath string
	Imports    []string
}

// list returns the module's packages with their non-test imports of the
// module, as module-relative paths.
func list(t *testing.T) []pkg {
	t.Helper()
	// go test puts its own GOROOT/bin first on the test's PATH.
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	cmd := exec.Command(goBin, "list", "-json", module+"/...")
	cmd.Dir = filepath.Join("..", "..")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		q := pkg{ImportPath: rel(p.ImportPath)}
		for _, imp := range p.Imports {
			if r := rel(imp); r != "" {
				q.Imports = append(q.Imports, r)
			}
		}
		pkgs = append(pkgs, q)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %d packages; is the module root ../..?", len(pkgs))
	}
	return pkgs
}

// rel returns p relative to the module, or "" for other modules.
func rel(p string) string {
	if p == module {
		return "."
	}
	r, ok := strings.CutPrefix(p, module+"/")
	if !ok {
		return ""
	}
	return r
}

func area(p string) string { a, _, _ := strings.Cut(p, "/"); return a }

// within reports whether p is the package dir or below it.
func within(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// allowed reports whether package from may import package to.
func allowed(from, to string) bool {
	if area(from) == area(to) {
		return true
	}
	for _, dir := range rules()[area(from)] {
		if dir == "*" || within(to, dir) {
			return true
		}
	}
	return false
}

// TestImportRules: no import runs back up the architecture's layers.
func TestImportRules(t *testing.T) {
	pkgs := list(t)
	known := rules()
	var bad []string
	for _, p := range pkgs {
		if _, ok := known[area(p.ImportPath)]; !ok {
			t.Errorf("package %s is in area %q, which has no import rule: add one to rules()", p.ImportPath, area(p.ImportPath))
			continue
		}
		for _, imp := range p.Imports {
			if !allowed(p.ImportPath, imp) {
				bad = append(bad, p.ImportPath+" -> "+imp)
			}
			for _, tp := range testOnly() {
				if imp == tp && !slices.Contains(testOnly(), p.ImportPath) {
					bad = append(bad, p.ImportPath+" -> "+imp+" (a test helper, for tests only)")
				}
			}
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("import against the architecture: %s", b)
	}
}

// TestRulesHoldTheArrows: the rules themselves say what architecture.md
// says, so that a loosened rule is noticed.
func TestRulesHoldTheArrows(t *testing.T) {
	for _, c := range []struct {
		from, to string
		ok       bool
	}{
		{"internal/payload", "records", false},
		{"internal/testutil", "broker", false},
		{"records", "internal/stats", true},
		{"records", "transport", false},
		{"transport", "broker", false},
		{"transport", "client", false},
		{"transport/endpoint", "transport", true},
		{"client/mqtt", "transport/endpoint", true},
		{"client", "broker", false},
		{"broker", "client", false},
		{"link", "transport", false},
		{"report", "broker", false},
		{"report", "lab", false},
		{"report", "link", false},
		{"report", "link/units", true},
		{"report", "records", true},
		{"lab", "report", false},
		{"lab", "cmd/iotq", false},
		{"cmd/iotq", "lab", true},
	} {
		if got := allowed(c.from, c.to); got != c.ok {
			t.Errorf("allowed(%s -> %s) = %v, want %v", c.from, c.to, got, c.ok)
		}
	}
}

// TestDocMatchesRules: the import table of docs/architecture.md is the
// rules() this package enforces, so the page cannot drift from the code.
func TestDocMatchesRules(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "architecture.md"))
	if err != nil {
		t.Fatalf("docs/architecture.md: %v", err)
	}
	_, table, ok := strings.Cut(string(b), "<!-- archtest:rules -->")
	table, _, ok2 := strings.Cut(table, "<!-- /archtest:rules -->")
	if !ok || !ok2 {
		t.Fatal("docs/architecture.md has no <!-- archtest:rules --> table")
	}
	doc := map[string][]string{}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) != 2 {
			continue
		}
		areaName, imports := strings.TrimSpace(cells[0]), strings.TrimSpace(cells[1])
		if areaName == "area" || strings.HasPrefix(areaName, "-") {
			continue
		}
		var list []string
		if imports != "(nothing else)" {
			for _, s := range strings.Split(imports, ",") {
				list = append(list, strings.TrimSpace(s))
			}
		}
		doc[areaName] = list
	}
	code := rules()
	for a, want := range code {
		got, ok := doc[a]
		if !ok {
			t.Errorf("docs/architecture.md lacks area %q (rules: %v)", a, want)
			continue
		}
		if !slices.Equal(sorted(got), sorted(want)) {
			t.Errorf("area %q: docs/architecture.md says %v, rules() says %v", a, got, want)
		}
	}
	for a := range doc {
		if _, ok := code[a]; !ok {
			t.Errorf("docs/architecture.md lists area %q, which rules() does not know", a)
		}
	}
}

func sorted(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}
