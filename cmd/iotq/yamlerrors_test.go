package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestYAMLErrorsOneShape: the same mistake in a broker configuration, a
// lab scenario and a link topology is reported in one shape
// (internal/yamlconf's "FILE:LINE: KEY: problem; expected ..."), naming
// the file, the line and the key, with exit code 1.
func TestYAMLErrorsOneShape(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	type file struct {
		what, src, line, key string
		args                 func(path string) []string
	}
	broker := func(p string) []string { return []string{"broker", "--config", p, "--check"} }
	scenario := func(p string) []string { return []string{"lab", "run", p, "--check"} }
	topology := func(p string) []string { return []string{"link", "up", p} }
	mistakes := []struct {
		name  string
		shape string // the message with file, line and key replaced
		files []file
	}{
		{"unknown key", "FILE:LINE: KEY: unknown key; expected one of: ...", []file{
			{"broker", "listen: [\"mqtt://127.0.0.1:0\"]\nflow:\n  colour: blue\n", "3", "flow.colour", broker},
			{"scenario", "experiment: x\ntopology:\n  colour: blue\n", "3", "topology.colour", scenario},
			{"topology", "links:\n  - {name: l, a: x, b: y, colour: blue}\n", "2", "links[0].colour", topology},
		}},
		{"word for a number", `FILE:LINE: KEY: got "lots"; expected a whole number`, []file{
			{"broker", "flow:\n  queue_length: lots\n", "2", "flow.queue_length", broker},
			{"scenario", "experiment: x\nmessages: lots\n", "2", "messages", scenario},
			{"topology", "links:\n  - {name: l, a: x, b: y, mtu: lots}\n", "2", "links[0].mtu", topology},
		}},
		{"syntax error", "FILE:LINE: not valid YAML: did not find expected ',' or ']'", []file{
			{"broker", "listen: [\"mqtt://127.0.0.1:0\"\nflow: {}\n", "", "", broker},
			{"scenario", "experiment: x\ntransports: [\"quic\"\nmessages: 5\n", "", "", scenario},
			{"topology", "links:\n  - {name: l, a: x, b: y}\nnodes: [\"x\"\nmedia: []\n", "", "", topology},
		}},
	}
	for _, m := range mistakes {
		t.Run(m.name, func(t *testing.T) {
			for _, f := range m.files {
				path := filepath.Join(dir, f.what+"-"+regexp.MustCompile(`\W`).ReplaceAllString(m.name, "")+".yaml")
				if err := os.WriteFile(path, []byte(f.src), 0o600); err != nil {
					t.Fatal(err)
				}
				code, _, stderr := runCLI(ctx, f.args(path)...)
				if code != exitFailure {
					t.Errorf("%s: exit %d, want %d\n%s", f.what, code, exitFailure, stderr)
				}
				msg := regexp.MustCompile(`(?m)` + regexp.QuoteMeta(path) + `:(\d+): (.*)$`).FindStringSubmatch(stderr)
				if msg == nil {
					t.Errorf("%s: no %s:LINE: message in\n%s", f.what, path, stderr)
					continue
				}
				if f.line != "" && msg[1] != f.line {
					t.Errorf("%s: line %s, want %s: %s", f.what, msg[1], f.line, msg[0])
				}
				rest := msg[2]
				if f.key != "" {
					r, ok := strings.CutPrefix(rest, f.key+": ")
					if !ok {
						t.Errorf("%s: %q does not name the key %s", f.what, rest, f.key)
						continue
					}
					rest = "KEY: " + r
				}
				shape := "FILE:LINE: " + regexp.MustCompile(`expected one of: .*`).ReplaceAllString(rest, "expected one of: ...")
				if shape != m.shape {
					t.Errorf("%s: shape %q, want %q (message %q)", f.what, shape, m.shape, msg[0])
				}
			}
		})
	}
}
