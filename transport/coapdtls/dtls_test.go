package coapdtls

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadPSKFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "psk")
	if err := os.WriteFile(good, []byte("# comment\n\ndev1:secret1\ndev2:0x736563726574\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := LoadPSKFile(good)
	if err != nil || string(m["dev1"]) != "secret1" || string(m["dev2"]) != "secret" || len(m) != 2 {
		t.Fatalf("%v %q", err, m)
	}
	for _, bad := range []string{"nocolon\n", "dev:0xzz\n", ":key\n"} {
		p := filepath.Join(dir, "bad")
		if err := os.WriteFile(p, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadPSKFile(p); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Fatalf("%q: want an error naming line 1, got %v", bad, err)
		}
	}
	if m, err := LoadPSKFile(""); err != nil || len(m) != 0 {
		t.Fatal("empty path must give an empty map")
	}
}

// TestPSKSession: a datagram each way over a DTLS-PSK session; the server
// sees the client's identity; a wrong key fails the handshake.
func TestPSKSession(t *testing.T) {
	l, err := Listen("127.0.0.1:0", Config{PSK: map[string][]byte{"dev1": []byte("secret1")}, HandshakeTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, l.LocalAddr().String(), ClientConfig{Identity: "dev1", Key: []byte("secret1")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WriteTo([]byte("ping"), nil); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, from, err := l.ReadFrom(buf)
	if err != nil || string(buf[:n]) != "ping" {
		t.Fatalf("%v %q", err, buf[:n])
	}
	if id := from.(Addr).Identity(); id != "dev1" {
		t.Fatalf("identity %q", id)
	}
	if _, err := l.WriteTo([]byte("pong"), from); err != nil {
		t.Fatal(err)
	}
	if n, _, err = c.ReadFrom(buf); err != nil || string(buf[:n]) != "pong" {
		t.Fatalf("%v %q", err, buf[:n])
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if c2, err := Dial(ctx2, l.LocalAddr().String(), ClientConfig{Identity: "dev1", Key: []byte("wrong")}); err == nil {
		c2.Close()
		t.Fatal("handshake with a wrong key succeeded")
	}
	var _ net.PacketConn = l
}
