package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/iotq/iotq/internal/testutil"
)

// What a new user hit on a fresh clone (issue 10, item 8), held here: the
// README's examples run with what scripts/setup.sh installs, setup leaves
// the user's services alone, and the examples use fresh state directories.

// readRepoFile returns a file of the repository, relative to its root.
func readRepoFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// shellBlocks returns the lines of the ```sh blocks of a Markdown text.
func shellBlocks(md string) []string {
	var out []string
	in := false
	sc := bufio.NewScanner(strings.NewReader(md))
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "```"):
			in = !in && strings.TrimPrefix(l, "```") == "sh"
		case in:
			out = append(out, l)
		}
	}
	return out
}

// splitShellWords splits a command line at spaces; 'single quoted' text
// is one word, taken literally (as sh does; no expansion).
func splitShellWords(line string) []string {
	var out []string
	var cur strings.Builder
	quoted, have := false, false
	for _, r := range line {
		switch {
		case r == '\'':
			quoted, have = !quoted, true
		case r == ' ' && !quoted:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

// TestReadmeLinkShellExampleRuns runs the README's `iotq link shell`
// example as written: its command (ping) must be there (scripts/setup.sh
// installs iputils-ping; under CI=true a missing ping fails the test).
func TestReadmeLinkShellExampleRuns(t *testing.T) {
	var line string
	for _, l := range shellBlocks(readRepoFile(t, "README.md")) {
		if strings.HasPrefix(l, "bin/iotq link shell ") {
			line = l
		}
	}
	if line == "" {
		t.Fatal("the README has no `bin/iotq link shell` example")
	}
	args := splitShellWords(line)[1:]
	if !strings.Contains(line, "ping") {
		t.Fatalf("the example runs no ping any more (%q): update this test", line)
	}
	testutil.RequireNetAdmin(t)
	testutil.RequireTool(t, "ping", "apt-get install iputils-ping")
	code, _, stderr := runCLI(t.Context(), args...)
	if code != exitOK {
		t.Fatalf("%s: exit %d (127: ping missing)\n%s", line, code, stderr)
	}
}

// TestSetupInstallsWhatTheReadmeRuns: every program the README's examples
// call beside iotq is one scripts/setup.sh installs.
func TestSetupInstallsWhatTheReadmeRuns(t *testing.T) {
	setup := readRepoFile(t, "scripts/setup.sh")
	examples := strings.Join(shellBlocks(readRepoFile(t, "README.md")), "\n")
	// program in the README -> what setup.sh checks for it
	for prog, check := range map[string]string{
		"ping": "ping", "mosquitto": "mosquitto", "mosquitto_pub": "mosquitto_pub",
		"coap-client-notls": "coap-client-notls", "java": "javac", "go": "",
	} {
		if !regexp.MustCompile(`(^|[\s'(])`+regexp.QuoteMeta(prog)+`\s`).MatchString(examples) || check == "" {
			continue
		}
		if !strings.Contains(setup, "command -v "+check+" ") {
			t.Errorf("the README runs %s, but scripts/setup.sh does not install it (no `command -v %s` check)", prog, check)
		}
	}
}

// TestSetupLeavesServicesAlone: scripts/setup.sh never stops, restarts or
// kills anything (a Mosquitto the user runs keeps running; the tests start
// their own on free ports).
func TestSetupLeavesServicesAlone(t *testing.T) {
	bad := regexp.MustCompile(`\bsystemctl\s+(stop|restart|disable|mask|kill)\b|\bservice\s+\S+\s+(stop|restart)\b|\bpkill\b|\bkillall\b|\bkill\s`)
	for i, l := range strings.Split(readRepoFile(t, "scripts/setup.sh"), "\n") {
		if code, _, _ := strings.Cut(l, "#"); bad.MatchString(code) {
			t.Errorf("scripts/setup.sh:%d stops or kills a process: %s", i+1, strings.TrimSpace(l))
		}
	}
}

// TestExamplesUseFreshStateDirs: the hand examples of the README and
// docs/ keep state in a fresh directory (S=$(mktemp -d)), never in a fixed
// /tmp name that collides with another user's or an earlier run's.
func TestExamplesUseFreshStateDirs(t *testing.T) {
	files := []string{"README.md"}
	docs, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		files = append(files, filepath.Join("docs", filepath.Base(d)))
	}
	fixed := regexp.MustCompile(`(^|[\s=])/tmp/`)
	for _, f := range files {
		for _, l := range shellBlocks(readRepoFile(t, f)) {
			if code, _, _ := strings.Cut(l, "#"); fixed.MatchString(code) {
				t.Errorf("%s: example uses a fixed /tmp path: %s", f, strings.TrimSpace(l))
			}
		}
	}
	readme := strings.Join(shellBlocks(readRepoFile(t, "README.md")), "\n")
	if !strings.Contains(readme, "S=$(mktemp -d)") || !strings.Contains(readme, "--state-dir $S") {
		t.Error("the README's hand example does not keep its state in S=$(mktemp -d)")
	}
}
