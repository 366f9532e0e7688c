package main

// A small testscript-style harness (the shape of cmd/go's
// testdata/script, without the dependency): each file in testdata/script
// is a script followed by txtar-style "-- name --" file sections, which are
// written into a fresh $WORK directory. Commands, one per line:
//
//	iotq ARGS...         run iotq in-process; it must exit 0
//	! iotq ARGS...       it must exit non-zero
//	iotq ARGS... &NAME   run in the background as job NAME ("&" alone: no name)
//	status N             the last iotq exited with N
//	stdout RE, stderr RE the last output matches the regular expression
//	! stdout RE, ...     it does not
//	wait [NAME]          wait for background job NAME (default: all); it
//	                     must exit 0; its output becomes the last output
//	stop [NAME]          interrupt job NAME (default: all) as SIGINT does
//	                     and wait for it; its output becomes the last output
//	waitfile PATH        wait until PATH exists
//	exists PATH          PATH exists (! exists: it does not)
//	grep RE PATH         the file matches (! grep: it does not)
//	env KEY=VALUE        set a variable for expansion
//
// Arguments are split on spaces, with 'single quotes' keeping spaces.
// $WORK, $PORT0...$PORT3 (free loopback ports) and variables set with env
// are expanded. Lines starting with # are comments. Every wait is bounded.
//
// Run one script: go test ./cmd/iotq -run TestScript/NAME

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/internal/testutil"
)

func TestScript(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "script", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata/script: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			t.Parallel()
			runScript(t, f)
		})
	}
}

// scriptState is one running script.
type scriptState struct {
	t              *testing.T
	vars           map[string]string
	code           int
	stdout, stderr string
	bg             []*bgRun
}

type bgRun struct {
	name   string
	cancel context.CancelFunc
	run    *cliRun
}

func runScript(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	script, files := splitTxtar(string(data))
	work := t.TempDir()
	for name, body := range files {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := &scriptState{t: t, vars: map[string]string{"WORK": work}}
	for i := range 4 {
		s.vars[fmt.Sprintf("PORT%d", i)] = strconv.Itoa(testutil.FreePort(t))
	}
	t.Cleanup(s.stopAll)
	for n, line := range strings.Split(script, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := s.exec(line); err != nil {
			t.Fatalf("%s:%d: %s: %v\n--- stdout\n%s--- stderr\n%s", path, n+1, line, err, s.stdout, s.stderr)
		}
	}
}

// splitTxtar separates the script from its "-- name --" file sections.
func splitTxtar(data string) (string, map[string]string) {
	files := map[string]string{}
	var script strings.Builder
	var name string
	var body strings.Builder
	flush := func() {
		if name != "" {
			files[name] = body.String()
		}
		body.Reset()
	}
	for _, line := range strings.SplitAfter(data, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "-- ") && strings.HasSuffix(trimmed, " --") && len(trimmed) > 6 {
			flush()
			name = strings.TrimSpace(trimmed[3 : len(trimmed)-3])
			continue
		}
		if name == "" {
			script.WriteString(line)
		} else {
			body.WriteString(line)
		}
	}
	flush()
	return script.String(), files
}

// fields splits a command line, keeping 'quoted text' together, and
// expands variables.
func (s *scriptState) fields(line string) []string {
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
	for i, f := range out {
		out[i] = os.Expand(f, func(k string) string { return s.vars[k] })
	}
	return out
}

func (s *scriptState) exec(line string) error {
	neg := false
	if rest, ok := strings.CutPrefix(line, "! "); ok {
		neg, line = true, rest
	}
	bg, job := false, ""
	if i := strings.LastIndex(line, " &"); i >= 0 && !strings.ContainsAny(line[i+2:], " '") {
		bg, job, line = true, line[i+2:], line[:i]
	}
	f := s.fields(line)
	cmd, args := f[0], f[1:]
	switch cmd {
	case "iotq":
		if bg {
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(60*time.Second))
			s.bg = append(s.bg, &bgRun{name: job, cancel: cancel, run: startCLI(ctx, args...)})
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(60*time.Second))
		defer cancel()
		s.code, s.stdout, s.stderr = runCLI(ctx, args...)
		if neg != (s.code != 0) {
			return fmt.Errorf("exit status %d", s.code)
		}
		return nil
	case "status":
		if len(args) != 1 || args[0] != strconv.Itoa(s.code) {
			return fmt.Errorf("exit status %d, want %v", s.code, args)
		}
		return nil
	case "stdout", "stderr":
		text := s.stdout
		if cmd == "stderr" {
			text = s.stderr
		}
		return match(neg, cmd, strings.Join(args, " "), text)
	case "grep":
		if len(args) != 2 {
			return fmt.Errorf("usage: grep RE PATH")
		}
		b, err := os.ReadFile(args[1])
		if err != nil {
			return err
		}
		return match(neg, args[1], args[0], string(b))
	case "exists":
		for _, p := range args {
			_, err := os.Stat(p)
			if neg == (err == nil) {
				return fmt.Errorf("exists %s: %v", p, err)
			}
		}
		return nil
	case "waitfile":
		deadline := time.Now().Add(testutil.Scale(20 * time.Second))
		for {
			if _, err := os.Stat(args[0]); err == nil {
				return nil
			}
			if time.Now().After(deadline) {
				s.collect(s.bg)
				return fmt.Errorf("%s not written in time", args[0])
			}
			time.Sleep(10 * time.Millisecond)
		}
	case "wait", "stop":
		name := ""
		if len(args) > 0 {
			name = args[0]
		}
		return s.waitJobs(name, cmd == "stop")
	case "env":
		k, v, ok := strings.Cut(strings.Join(args, " "), "=")
		if !ok {
			return fmt.Errorf("usage: env KEY=VALUE")
		}
		s.vars[k] = v
		return nil
	}
	return fmt.Errorf("unknown command %q", cmd)
}

func match(neg bool, what, re, text string) error {
	rx, err := regexp.Compile("(?m)" + re)
	if err != nil {
		return err
	}
	if rx.MatchString(text) == neg {
		if neg {
			return fmt.Errorf("%s matches %q", what, re)
		}
		return fmt.Errorf("%s does not match %q", what, re)
	}
	return nil
}

// waitJobs waits for (interrupt: stops) background job name, or all jobs
// for "", and makes their output the last output. A non-zero exit of a job
// that was not interrupted fails.
func (s *scriptState) waitJobs(name string, interrupt bool) error {
	var errs []string
	var picked, rest []*bgRun
	for _, b := range s.bg {
		if name == "" || b.name == name {
			picked = append(picked, b)
		} else {
			rest = append(rest, b)
		}
	}
	if len(picked) == 0 {
		return fmt.Errorf("no background job %q", name)
	}
	for _, b := range picked {
		if interrupt {
			b.cancel()
		}
		select {
		case <-b.run.done:
		case <-time.After(testutil.Scale(60 * time.Second)):
			b.cancel()
			<-b.run.done
			errs = append(errs, fmt.Sprintf("job %q did not end in time", b.name))
		}
		if !interrupt && b.run.code != 0 {
			errs = append(errs, fmt.Sprintf("job %q exited %d", b.name, b.run.code))
		}
		b.cancel()
	}
	s.collect(picked)
	s.code = picked[len(picked)-1].run.code
	s.bg = rest
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// collect makes the jobs' output the last output.
func (s *scriptState) collect(jobs []*bgRun) {
	var so, se bytes.Buffer
	for _, b := range jobs {
		so.WriteString(b.run.out.String())
		se.WriteString(b.run.errb.String())
	}
	s.stdout, s.stderr = so.String(), se.String()
}

// stopAll ends whatever a failed script left running.
func (s *scriptState) stopAll() {
	for _, b := range s.bg {
		b.cancel()
		<-b.run.done
	}
}
