package main

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/lab"
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

// handBlock returns the README's "Try it by hand" shell block.
func handBlock(t *testing.T) string {
	t.Helper()
	return tryItBlock(t, "README.md")
}

// tryItBlock returns the first sh block of a Markdown file's "Try it by
// hand" (or "Try it") section.
func tryItBlock(t *testing.T, file string) string {
	t.Helper()
	md := readRepoFile(t, file)
	_, after, ok := strings.Cut(md, "\n## Try it by hand\n")
	if !ok {
		_, after, ok = strings.Cut(md, "\n## Try it\n")
	}
	if !ok {
		t.Fatalf(`%s has no "## Try it by hand" (or "## Try it") section`, file)
	}
	_, after, ok = strings.Cut(after, "```sh\n")
	if !ok {
		t.Fatalf(`%s: "Try it by hand" has no sh block`, file)
	}
	block, _, ok := strings.Cut(after, "```\n")
	if !ok {
		t.Fatalf(`%s: "Try it by hand": unterminated sh block`, file)
	}
	return block
}

// TestReadmeTryItByHandIsSelfContained checks the walkthroughs (README,
// docs/amqp.md, docs/gateway.md) as text:
// loopback addresses only, every server with state under $S and a ready
// file waited for, and a last line that stops every job and removes $S.
func TestReadmeTryItByHandIsSelfContained(t *testing.T) {
	for _, f := range []string{"README.md", "docs/amqp.md", "docs/gateway.md"} {
		t.Run(f, func(t *testing.T) { checkSelfContained(t, tryItBlock(t, f)) })
	}
}

func checkSelfContained(t *testing.T, block string) {
	for _, m := range regexp.MustCompile(`://([^/:'\s]+)|\s-h\s+(\S+)`).FindAllStringSubmatch(block, -1) {
		if host := m[1] + m[2]; host != "127.0.0.1" {
			t.Errorf("walkthrough uses host %q: loopback (127.0.0.1) only", host)
		}
	}
	joined := strings.ReplaceAll(block, "\\\n", " ")
	for _, l := range strings.Split(joined, "\n") {
		code, _, _ := strings.Cut(l, " #")
		if !regexp.MustCompile(`^bin/iotq (broker|gateway) `).MatchString(code) {
			continue
		}
		if !strings.Contains(code, "--state-dir $S") || !strings.Contains(code, "--ready-file $S/") {
			t.Errorf("server without --state-dir $S… and --ready-file $S/…: %s", code)
		}
	}
	lines := strings.Split(strings.TrimSpace(block), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "kill $(jobs -p)") || !strings.Contains(last, "wait") || !strings.Contains(last, `rm -rf "$S"`) {
		t.Errorf("the walkthrough's last line %q does not stop its jobs and remove $S", last)
	}
}

// TestReadmeTryItByHand runs the README's "Try it by hand" block as
// written (runWalkthrough): the sub's seventh message, the 0-RTT repeat,
// the gateway, AMQP and CoAP runs and the emulated link must all happen.
func TestReadmeTryItByHand(t *testing.T) {
	block := handBlock(t)
	testutil.RequireNetAdmin(t) // link shell
	requireArtemis(t)
	for tool, install := range map[string]string{"mosquitto": "apt-get install mosquitto",
		"mosquitto_pub": "apt-get install mosquitto-clients", "coap-client-notls": "apt-get install libcoap3-bin",
		"ping": "apt-get install iputils-ping"} {
		testutil.RequireTool(t, tool, install)
	}
	runWalkthrough(t, block, []string{
		`"used_0rtt":true`,       // the 0-RTT repeat ran
		"sensors/t1 hello",       // mosquitto_pub's message reached sub: its 7th
		`"role":"sub"`,           // sub -n 7 ended with its stats
		"sensors.t1 over-quic",   // AMQP through the gateway
		`"transport":"coap+tcp"`, // iotq pub over CoAP
		"5 packets transmitted",  // ping through the emulated link (2 % loss: some may be lost)
	})
}

// requireArtemis skips (fails under CI=true) without the embedded Artemis
// the walkthroughs start with java.
func requireArtemis(t *testing.T) {
	t.Helper()
	testutil.RequireTool(t, "java", "apt-get install openjdk-17-jre-headless")
	home, _ := os.UserHomeDir()
	if _, err := os.Stat(filepath.Join(home, ".cache", "iotq", "artemis-2.55.0", "classes")); err != nil {
		testutil.SkipOrFail(t, "the embedded Artemis is not built (%v; scripts/setup.sh builds it)", err)
	}
}

// TestAMQPDocTryItByHand runs the "Try it by hand" block of docs/amqp.md
// (its first line, scripts/setup.sh, aside) the same way.
func TestAMQPDocTryItByHand(t *testing.T) {
	block := tryItBlock(t, "docs/amqp.md")
	requireArtemis(t)
	first, rest, _ := strings.Cut(block, "\n")
	if !strings.HasPrefix(first, "bash scripts/setup.sh") {
		t.Fatalf("docs/amqp.md's walkthrough no longer starts with scripts/setup.sh (%q): update this test", first)
	}
	runWalkthrough(t, rest, []string{
		"sensors.t1 hello", // sub got pub's messages
		`"used_0rtt":true`, // the second pipelined start rode in 0-RTT
	})
}

// TestGatewayDocTryIt runs the "Try it" block of docs/gateway.md the same
// way: the second run through the gateway rides in 0-RTT.
func TestGatewayDocTryIt(t *testing.T) {
	testutil.RequireTool(t, "mosquitto", "apt-get install mosquitto")
	runWalkthrough(t, tryItBlock(t, "docs/gateway.md"), []string{`"used_0rtt":false`, `"used_0rtt":true`})
}

// runWalkthrough runs a documented walkthrough as written, with bash and
// a bin/iotq built for the test, in a fresh directory (TMPDIR, so $S, is
// inside it). An ERR trap reports every command that fails (the kill of
// the last line aside: a job may have ended). It must end by itself within
// the time bound, print each of wants, remove $S and leave no process of
// its process group behind.
func runWalkthrough(t *testing.T, block string, wants []string) {
	t.Helper()
	testutil.RequireTool(t, "bash", "apt-get install bash")
	// Its ports are fixed (below the ephemeral range): one taken by
	// another program would make a server exit.
	for _, m := range regexp.MustCompile(`(?:127\.0\.0\.1:|-p |--port )(\d+)`).FindAllStringSubmatch(block, -1) {
		port, _ := strconv.Atoi(m[1])
		if !portFree(port) {
			testutil.SkipOrFail(t, "port %d, which the walkthrough uses, is taken on this host", port)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	work := t.TempDir()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(work, "bin", "iotq"), ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tmp := filepath.Join(work, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	trap := `set -E; trap 'case $BASH_COMMAND in kill\ *) ;; *) echo "WALKTHROUGH STEP FAILED (exit $?): $BASH_COMMAND" >&2;; esac' ERR` + "\n"
	var stdout, stderr syncBuffer
	cmd := exec.CommandContext(ctx, "bash", "-c", trap+block)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "XDG_STATE_HOME="+filepath.Join(work, "xdg-state"))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Its own process group: the jobs the block starts are in it, so the
	// test can tell whether any is left and stop them all on a timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) }) // whatever is left of it, nothing else
	err := cmd.Wait()
	tail := func(s string) string {
		if len(s) > 4000 {
			s = "…" + s[len(s)-4000:]
		}
		return s
	}
	if ctx.Err() != nil {
		t.Fatalf("the walkthrough did not end within 4 minutes\nstdout:\n%s\nstderr:\n%s", tail(stdout.String()), tail(stderr.String()))
	}
	if err != nil {
		t.Errorf("bash: %v", err)
	}
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.HasPrefix(l, "WALKTHROUGH STEP FAILED") {
			t.Errorf("%s", l)
		}
	}
	out := stdout.String()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", tail(out), tail(stderr.String()))
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("the walkthrough left %d entries in its temporary directory (rm -rf \"$S\")", len(left))
	}
	// Every process the block started has ended ("kill $(jobs -p); wait").
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(-pgid, 0) == nil {
		if time.Now().After(deadline) {
			t.Errorf("processes of the walkthrough still run after it ended (process group %d)", pgid)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// portFree reports whether port is free on 127.0.0.1 for TCP and UDP.
func portFree(port int) bool {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	l.Close()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	pc.Close()
	return true
}

// TestReadmeLabRowListsEveryScenario: the README's `iotq lab` row names
// every built-in scenario, and none that is not one.
func TestReadmeLabRowListsEveryScenario(t *testing.T) {
	var row string
	for _, l := range strings.Split(readRepoFile(t, "README.md"), "\n") {
		if strings.HasPrefix(l, "| `iotq lab ") {
			row = l
		}
	}
	if row == "" {
		t.Fatal("the README has no `iotq lab` row in its command table")
	}
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`((?:smoke|e\\d)[a-z0-9-]*)`").FindAllStringSubmatch(row, -1) {
		named[m[1]] = true
	}
	builtin := map[string]bool{}
	for _, n := range lab.BuiltinNames() {
		builtin[n] = true
		if !named[n] {
			t.Errorf("the README's lab row does not name the built-in scenario %s", n)
		}
	}
	for n := range named {
		if !builtin[n] {
			t.Errorf("the README's lab row names %s, which is no built-in scenario", n)
		}
	}
}

// TestVersionListsProtocolLibraries: `iotq version` names the library of
// every protocol and transport iotq speaks.
func TestVersionListsProtocolLibraries(t *testing.T) {
	code, out, errs := runCLI(t.Context(), "version")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, lib := range []string{"github.com/quic-go/quic-go v", "github.com/Azure/go-amqp v", "github.com/plgd-dev/go-coap/v3 v",
		"github.com/pion/dtls/v3 v", "github.com/eclipse/paho.mqtt.golang v", "github.com/eclipse/paho.golang v"} {
		if !strings.Contains(out, lib) {
			t.Errorf("iotq version lacks %s…:\n%s", lib, out)
		}
	}
}
