package mqtt

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// freePort returns a currently free TCP port on 127.0.0.1.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// needTool skips (or fails under CI=true) when a peer program is missing.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		p, err = exec.LookPath(filepath.Join("/usr/sbin", name))
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not installed (CI must install mosquitto: apt-get install mosquitto mosquitto-clients)", name)
		}
		t.Skipf("%s not installed; apt-get install mosquitto mosquitto-clients", name)
	}
	return p
}

// mosquitto is a Mosquitto broker started by a test.
type mosquitto struct {
	port int // plain MQTT listener on 127.0.0.1
	dir  string
}

// url returns the mqtt:// URL of the plain listener.
func (m *mosquitto) url() string { return fmt.Sprintf("mqtt://127.0.0.1:%d", m.port) }

// startMosquitto starts mosquitto with a plain listener on a free port plus
// the extra configuration lines (which may contain %PORT(n)% placeholders
// filled via extraPorts). It stops the broker in t.Cleanup.
func startMosquitto(t *testing.T, extra string, extraPorts ...int) *mosquitto {
	t.Helper()
	bin := needTool(t, "mosquitto")
	m := &mosquitto{port: freePort(t), dir: t.TempDir()}
	conf := fmt.Sprintf("user root\nper_listener_settings false\nallow_anonymous true\npersistence false\nlog_dest stderr\nlog_type error\nlog_type warning\nlistener %d 127.0.0.1\n%s\n", m.port, extra)
	cf := filepath.Join(m.dir, "mosquitto.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(m.dir, "mosquitto.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	logText := func() string { b, _ := os.ReadFile(logf.Name()); return string(b) }
	cmd := exec.Command(bin, "-c", cf)
	cmd.Stderr = logf
	cmd.Stdout = logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start mosquitto: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	ports := append([]int{m.port}, extraPorts...)
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range ports {
		for {
			c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p), time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-exited:
				t.Fatalf("mosquitto exited: %s", logText())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("mosquitto not listening on %d: %v; log: %s", p, err, logText())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return m
}
