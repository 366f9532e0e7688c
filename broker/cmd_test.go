package broker_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/iotq/iotq/internal/testutil"
)

// buildIotq builds the iotq binary once per test binary run.
func buildIotq(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "iotq")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/iotq/iotq/cmd/iotq").CombinedOutput()
	if err != nil {
		t.Fatalf("build iotq: %v\n%s", err, out)
	}
	return bin
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestBrokerCommand drives `iotq broker` as a user would.
func TestBrokerCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the iotq binary")
	}
	bin := buildIotq(t)
	dir := t.TempDir()

	t.Run("print-config shows flags over the file", func(t *testing.T) {
		cfg := filepath.Join(dir, "ok.yaml")
		os.WriteFile(cfg, []byte("listen: [mqtt://0.0.0.0:1883]\nflow:\n  queue_length: 100\n"), 0o644)
		out, err := exec.Command(bin, "broker", "--config", cfg, "--queue-length", "200", "--print-config").Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"- mqtt://0.0.0.0:1883", "queue_length: 200", "early_data: hold"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("print-config lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("a broken file fails with key and line", func(t *testing.T) {
		cfg := filepath.Join(dir, "bad.yaml")
		os.WriteFile(cfg, []byte("listen: [mqtt://:1883]\nquic:\n  idle_timeout: forever\nbogus: 1\n"), 0o644)
		var stderr bytes.Buffer
		cmd := exec.Command(bin, "broker", "--config", cfg, "--check")
		cmd.Stderr = &stderr
		err := cmd.Run()
		if exitCode(err) != 1 {
			t.Fatalf("exit %v, want 1; stderr %s", err, stderr.String())
		}
		for _, want := range []string{"bad.yaml:3: quic.idle_timeout", "expected a duration", "bad.yaml:4: bogus: unknown key"} {
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
			}
		}
	})
	t.Run("bad flags exit 2", func(t *testing.T) {
		err := exec.Command(bin, "broker", "--listen", "gopher://x", "--check").Run()
		if exitCode(err) != 2 {
			t.Fatalf("exit %v, want 2", err)
		}
	})
	t.Run("a taken port gives one clear line with a hint", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		var stderr bytes.Buffer
		cmd := exec.Command(bin, "broker", "--listen", "mqtt://"+l.Addr().String(), "--state-dir", filepath.Join(dir, "taken"))
		cmd.Stderr = &stderr
		if err := cmd.Run(); exitCode(err) != 1 {
			t.Fatalf("exit %v, want 1; stderr: %s", err, stderr.String())
		}
		out := strings.TrimSpace(stderr.String())
		if strings.Count(out, "\n") != 0 || !strings.Contains(out, "already in use") || !strings.Contains(out, "--listen") ||
			strings.Contains(out, "broker: broker:") || strings.Contains(out, "broker stopped") {
			t.Fatalf("want one line naming the taken address and a hint, got:\n%s", out)
		}
	})
	t.Run("passwd adds a hashed user", func(t *testing.T) {
		pw := filepath.Join(dir, "passwd")
		cmd := exec.Command(bin, "broker", "passwd", pw, "alice")
		cmd.Stdin = strings.NewReader("s3cret\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		b, _ := os.ReadFile(pw)
		if !strings.HasPrefix(string(b), "alice:$2a$") || strings.Contains(string(b), "s3cret") {
			t.Fatalf("password file: %q", b)
		}
	})
	t.Run("runs, writes the ready file and exits 0 on SIGTERM", func(t *testing.T) {
		rf := filepath.Join(dir, "ready.json")
		var stderr bytes.Buffer
		cmd := exec.Command(bin, "broker", "--listen", "mqtt://127.0.0.1:0", "--listen", "mqtts://127.0.0.1:0",
			"--state-dir", filepath.Join(dir, "state"), "--ready-file", rf, "--log-format", "json")
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		var ready struct {
			Listeners []string `json:"listeners"`
			CAFile    string   `json:"ca_file"`
			PID       int      `json:"pid"`
		}
		testutil.Eventually(t, 15*time.Second, func() error {
			b, err := os.ReadFile(rf)
			if err != nil {
				return err
			}
			return json.Unmarshal(b, &ready)
		})
		if len(ready.Listeners) != 2 || ready.PID != cmd.Process.Pid || !strings.HasSuffix(ready.CAFile, "tls/ca.pem") {
			t.Fatalf("ready file: %+v", ready)
		}
		if _, err := os.Stat(ready.CAFile); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("exit: %v\n%s", err, stderr.String())
			}
		case <-time.After(testutil.Scale(10 * time.Second)):
			t.Fatal("broker did not exit after SIGTERM")
		}
		if !strings.Contains(stderr.String(), `"msg":"broker ready"`) {
			t.Errorf("no JSON 'broker ready' log:\n%s", stderr.String())
		}
	})
}
