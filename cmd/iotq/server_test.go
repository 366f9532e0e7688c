package main

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTakenAddressOneLineWithHint: a server whose listen or metrics
// address is taken exits 1 with one line that names the address, says how
// to find its holder and which flag to change: no repeated "broker:
// broker:" or "listen X: listen X" chains of the packages underneath.
func TestTakenAddressOneLineWithHint(t *testing.T) {
	dir := t.TempDir()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	tcpAddr, udpAddr := tcp.Addr().String(), udp.LocalAddr().String()
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"broker listen", []string{"broker", "--listen", "mqtt://" + tcpAddr, "--state-dir", filepath.Join(dir, "b1")},
			[]string{"already in use", tcpAddr, "ss -ltnup", "--listen"}},
		{"broker quic listen", []string{"broker", "--listen", "quic://" + udpAddr, "--state-dir", filepath.Join(dir, "b2")},
			[]string{"already in use", udpAddr, "--listen"}},
		{"broker metrics", []string{"broker", "--listen", "mqtt://127.0.0.1:0", "--metrics", tcpAddr, "--state-dir", filepath.Join(dir, "b3")},
			[]string{"already in use", tcpAddr, "(TCP)", "ss -ltnp", "--metrics"}},
		{"gateway route", []string{"gateway", "--route", "quic://" + udpAddr + "=tcp://127.0.0.1:1", "--state-dir", filepath.Join(dir, "g1")},
			[]string{"already in use", udpAddr, "(UDP)", "ss -lunp", "--route"}},
		{"gateway metrics", []string{"gateway", "--route", "quic://127.0.0.1:0=tcp://127.0.0.1:1", "--metrics", tcpAddr, "--state-dir", filepath.Join(dir, "g2")},
			[]string{"already in use", tcpAddr, "--metrics"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			code, _, stderr := runCLI(ctx, c.args...)
			if code != exitFailure {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitFailure, stderr)
			}
			var errLines []string
			for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
				if strings.HasPrefix(l, "iotq ") {
					errLines = append(errLines, l)
				}
			}
			if len(errLines) != 1 || strings.Contains(stderr, "stopped") {
				t.Fatalf("want one error line and no shutdown log, got:\n%s", stderr)
			}
			line := errLines[0]
			for _, w := range c.want {
				if !strings.Contains(line, w) {
					t.Errorf("error line lacks %q: %s", w, line)
				}
			}
			for _, bad := range []string{"broker: broker:", "gateway: gateway:", "listen tcp", "listen udp", "want HOST:PORT"} {
				if strings.Contains(line, bad) {
					t.Errorf("error line has %q: %s", bad, line)
				}
			}
		})
	}
}
