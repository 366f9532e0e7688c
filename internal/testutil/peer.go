package testutil

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// RequireTool returns the path of the program name (looked up in PATH, then
// /usr/sbin and /usr/local/sbin). When it is missing the test is skipped
// with install as the hint, or fails under CI=true (scripts/setup.sh
// installs every peer CI needs).
func RequireTool(t testing.TB, name, install string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin"} {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	SkipOrFail(t, "%s not installed (%s; scripts/setup.sh installs it)", name, install)
	return ""
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Mosquitto is a Mosquitto broker process started by a test.
type Mosquitto struct {
	Port int    // plain MQTT listener on 127.0.0.1
	Dir  string // its configuration and log
	PID  int

	exited   chan struct{}
	killOnce sync.Once
	kill     func()
}

// Addr returns 127.0.0.1:PORT of the plain listener.
func (m *Mosquitto) Addr() string { return fmt.Sprintf("127.0.0.1:%d", m.Port) }

// URL returns the mqtt:// URL of the plain listener.
func (m *Mosquitto) URL() string { return "mqtt://" + m.Addr() }

// Log returns what the broker logged so far.
func (m *Mosquitto) Log() string {
	b, _ := os.ReadFile(filepath.Join(m.Dir, "mosquitto.log"))
	return string(b)
}

// Kill kills the broker (only this process, by its PID) and waits for it.
// Idempotent; t.Cleanup calls it too.
func (m *Mosquitto) Kill() { m.killOnce.Do(m.kill) }

// StartMosquitto starts mosquitto on a free loopback port with anonymous
// access and no persistence, plus the extra configuration lines (later
// lines override earlier ones), waits until the plain listener and every
// port of waitPorts accept, and kills it in t.Cleanup. It skips (fails
// under CI=true) when mosquitto is not installed.
func StartMosquitto(t testing.TB, extra string, waitPorts ...int) *Mosquitto {
	t.Helper()
	bin := RequireTool(t, "mosquitto", "apt-get install mosquitto mosquitto-clients")
	m := &Mosquitto{Port: FreePort(t), Dir: t.TempDir(), exited: make(chan struct{})}
	conf := fmt.Sprintf("user root\nper_listener_settings false\nallow_anonymous true\npersistence false\nlog_dest stderr\nlog_type error\nlog_type warning\nlistener %d 127.0.0.1\n%s\n", m.Port, extra)
	cf := filepath.Join(m.Dir, "mosquitto.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(m.Dir, "mosquitto.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", cf)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start mosquitto: %v", err)
	}
	m.PID = cmd.Process.Pid
	go func() { _ = cmd.Wait(); logf.Close(); close(m.exited) }()
	m.kill = func() { _ = cmd.Process.Kill(); <-m.exited }
	t.Cleanup(m.Kill)
	for _, p := range append([]int{m.Port}, waitPorts...) {
		addr := fmt.Sprintf("127.0.0.1:%d", p)
		Eventually(t, 10*time.Second, func() error {
			select {
			case <-m.exited:
				t.Fatalf("mosquitto exited: %s", m.Log())
			default:
			}
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				return fmt.Errorf("mosquitto not listening on %s: %w; log: %s", addr, err, m.Log())
			}
			return c.Close()
		})
	}
	return m
}
