package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/iotq/iotq/internal/certs"
	"github.com/iotq/iotq/internal/testutil"
)

// requireTool returns the path of a real peer (testutil.RequireTool:
// skipped when missing, failed under CI=true).
func requireTool(t *testing.T, name string) string {
	t.Helper()
	return testutil.RequireTool(t, name, "apt-get install mosquitto mosquitto-clients")
}

// readPacket reads one MQTT control packet: type byte and body.
func readPacket(r *bufio.Reader) (byte, []byte, error) {
	h, err := r.ReadByte()
	if err != nil {
		return 0, nil, err
	}
	n, mul := 0, 1
	for i := 0; ; i++ {
		b, err := r.ReadByte()
		if err != nil {
			return 0, nil, err
		}
		n += int(b&0x7f) * mul
		if b&0x80 == 0 {
			break
		}
		if i == 3 {
			return 0, nil, errors.New("bad remaining length")
		}
		mul *= 128
	}
	body := make([]byte, n)
	_, err = io.ReadFull(r, body)
	return h, body, err
}

// connectPacket is an MQTT 3.1.1 CONNECT with clean session.
func connectPacket(clientID string) []byte {
	vh := []byte{0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 60}
	pl := append([]byte{byte(len(clientID) >> 8), byte(len(clientID))}, clientID...)
	body := append(vh, pl...)
	return append([]byte{0x10, byte(len(body))}, body...)
}

// TestInteropMosquittoPubTrustsGeneratedCert: OpenSSL (mosquitto_pub)
// verifies the generated leaf for an IP and for a DNS name, and talks to
// our mqtts listener.
func TestInteropMosquittoPubTrustsGeneratedCert(t *testing.T) {
	pub := requireTool(t, "mosquitto_pub")
	noLeak(t)
	dir := t.TempDir()
	srv, _ := serverTLS(t, dir)
	l, err := Listen("mqtts://127.0.0.1:0", ListenOptions{TLSConfig: srv})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 4)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept(context.Background())
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				r := bufio.NewReader(c)
				for {
					typ, body, err := readPacket(r)
					if err != nil {
						return
					}
					switch typ >> 4 {
					case 1: // CONNECT
						_, _ = c.Write([]byte{0x20, 2, 0, 0})
					case 3: // PUBLISH, QoS 0
						tl := int(body[0])<<8 | int(body[1])
						got <- string(body[2:2+tl]) + " " + string(body[2+tl:])
					case 14: // DISCONNECT
						return
					}
				}
			}()
		}
	}()
	for _, host := range []string{"127.0.0.1", "localhost"} {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		out, err := exec.CommandContext(ctx, pub, "-h", host, "-p", fmt.Sprint(l.Endpoint().Port),
			"--cafile", certs.FilesIn(dir).CA, "-t", "t/"+host, "-m", "hello").CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("mosquitto_pub to %s: %v\n%s", host, err, out)
		}
		select {
		case m := <-got:
			if m != "t/"+host+" hello" {
				t.Fatalf("got %q", m)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no PUBLISH arrived")
		}
	}
}

// TestInteropDialMosquittoTLS: our mqtts dialer against a Mosquitto broker
// that serves the generated certificate; the second connection resumes the
// TLS session from a file cache (OpenSSL tickets).
func TestInteropDialMosquittoTLS(t *testing.T) {
	mosq := requireTool(t, "mosquitto")
	noLeak(t)
	dir := t.TempDir()
	_, cli := serverTLS(t, dir)
	f := certs.FilesIn(dir)
	pc, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := pc.Addr().(*net.TCPAddr).Port
	pc.Close()
	conf := filepath.Join(dir, "mosquitto.conf")
	cfg := fmt.Sprintf("user root\npersistence false\nlistener %d 127.0.0.1\ncertfile %s\nkeyfile %s\nallow_anonymous true\n", port, f.Cert, f.Key)
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(mosq, "-c", conf)
	logf, err := os.Create(filepath.Join(dir, "mosquitto.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
	url := fmt.Sprintf("mqtts://127.0.0.1:%d", port)
	cacheFile := filepath.Join(t.TempDir(), "c.json")
	var infos []Info
	for i := range 2 {
		cache, err := NewFileSessionCache(cacheFile, nil)
		if err != nil {
			t.Fatal(err)
		}
		var c Conn
		deadline := time.Now().Add(10 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c, err = Dial(ctx, url, DialOptions{TLSConfig: cli, SessionCache: cache})
			cancel()
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond) // broker still starting
		}
		if err != nil {
			b, _ := os.ReadFile(filepath.Join(dir, "mosquitto.log"))
			t.Fatalf("dial mosquitto: %v\n%s", err, b)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(connectPacket(fmt.Sprintf("iotq-transport-%d", i))); err != nil {
			t.Fatal(err)
		}
		typ, body, err := readPacket(bufio.NewReader(c))
		if err != nil || typ != 0x20 || len(body) != 2 || body[1] != 0 {
			t.Fatalf("want CONNACK accepted, got type %#x body %v err %v", typ, body, err)
		}
		_, _ = c.Write([]byte{0xe0, 0})
		infos = append(infos, c.Info())
		c.Close()
		cache.Close()
		if i == 0 {
			waitTicket(t, cacheFile)
		}
	}
	if infos[0].TLSResumed || !infos[1].TLSResumed {
		t.Fatalf("resumption against mosquitto: first %v, second %v; want false, true", infos[0].TLSResumed, infos[1].TLSResumed)
	}
}
