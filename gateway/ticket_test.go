package gateway_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/gateway"
	"github.com/iotq/iotq/internal/certs"
	iotqtest "github.com/iotq/iotq/internal/testutil"
)

// TestTicketKeysShared: gateway instances behind one address (here: one
// after the other on the same UDP port, as a load balancer would send a
// client to either) with the same certificate and tls.ticket_keys_file
// accept each other's tickets, so a client resumes with 0-RTT whichever
// instance it reaches; an instance with its own keys (the default, one per
// state directory) makes it do a full handshake. Rotation: with the file
// [new, old] an old ticket still gives 0-RTT (every key decrypts) and the
// ticket issued then is under the new key (the first encrypts): an
// instance with [new] only accepts it.
func TestTicketKeysShared(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{Listen: []string{"mqtt://127.0.0.1:0"}, StateDir: t.TempDir()})
	up := strings.Replace(brokertest.Endpoint(t, srv, "mqtt"), "mqtt://", "tcp://", 1)
	dir := t.TempDir()
	cert, err := certs.EnsureServerCert(filepath.Join(dir, "cert"), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	newKey := func() string {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		return hex.EncodeToString(b)
	}
	oldKey, nextKey := newKey(), newKey()
	keyFile := func(name string, keys ...string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("# first encrypts, all decrypt\n"+strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	shared := keyFile("shared.keys", oldKey)
	rotating := keyFile("rotating.keys", nextKey, oldKey)
	rotated := keyFile("rotated.keys", nextKey)

	ctx, cancel := context.WithTimeout(context.Background(), iotqtest.Scale(60*time.Second))
	defer cancel()
	listen := "quic://127.0.0.1:0"
	// instance runs one gateway on the shared address with keys (""
	// means its own, in its state directory), lets one client connect
	// with the ticket cache file cache (a QoS 1 round trip, so the
	// client holds the new ticket), stops the gateway and returns the
	// client's connection facts.
	instance := func(name, keys, cache string) client.ConnectionInfo {
		t.Helper()
		g, err := gateway.New(gateway.Options{
			Routes:   []gateway.Route{{Listen: listen, Upstreams: []string{up}}},
			StateDir: filepath.Join(dir, name),
			TLS:      gateway.TLSOptions{Cert: cert.Cert, Key: cert.Key, TicketKeysFile: keys},
			Logger:   iotqtest.Logger(t),
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := g.Start(ctx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer g.Close()
		listen = g.Endpoints()[0] // the next instances take the same port
		return connectOnce(ctx, t, name, listen, cert.CA, cache)
	}
	copyCache := func(from, to string) string {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, to)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	want0RTT := func(name string, info client.ConnectionInfo, want bool) {
		t.Helper()
		if info.Used0RTT != want || info.TLSResumed != want {
			t.Errorf("%s: Used0RTT %v TLSResumed %v (Rejected0RTT %v); want 0-RTT %v", name, info.Used0RTT, info.TLSResumed, info.Rejected0RTT, want)
		}
	}

	cacheA := filepath.Join(dir, "a.tickets")
	want0RTT("A, first contact", instance("A", shared, cacheA), false)
	cacheOwn := copyCache(cacheA, "own.tickets")
	cacheRot := copyCache(cacheA, "rot.tickets")
	want0RTT("B (same key file as A)", instance("B", shared, cacheA), true)
	want0RTT("C (its own keys)", instance("C", "", cacheOwn), false)
	want0RTT("D ([new, old], A's ticket)", instance("D", rotating, cacheRot), true)
	want0RTT("E ([new], D's ticket)", instance("E", rotated, cacheRot), true)
}

// connectOnce connects one client to url with the ticket cache file cache,
// waits for a QoS 1 round trip (so the client holds the new ticket), closes
// it (writing the cache) and returns its connection facts.
func connectOnce(ctx context.Context, t *testing.T, name, url, ca, cache string) client.ConnectionInfo {
	t.Helper()
	c, err := client.Dial(ctx, url, client.Options{CAFile: ca, SessionCacheFile: cache, Logger: iotqtest.Logger(t)})
	if err != nil {
		t.Fatalf("%s: dial: %v", name, err)
	}
	r, err := c.Publish(ctx, "gw/tickets", []byte(name), client.PublishOptions{QoS: 1})
	if err == nil {
		err = r.Wait(ctx)
	}
	if err != nil {
		t.Fatalf("%s: publish: %v", name, err)
	}
	info := c.ConnectionInfo()
	if err := c.Close(); err != nil {
		t.Fatalf("%s: close: %v", name, err)
	}
	return info
}

// lockedLog collects a gateway's log lines.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestTicketKeysReload: a running gateway reads tls.ticket_keys_file again
// when it changes (checked at most once a second, on a handshake): after
// the file is replaced by a new key alone, a ticket under the old key no
// longer resumes, and the ticket issued then (under the new key) does; a
// file that no longer loads keeps the keys in use and says so in the log.
func TestTicketKeysReload(t *testing.T) {
	srv := brokertest.Start(t, broker.Options{Listen: []string{"mqtt://127.0.0.1:0"}, StateDir: t.TempDir()})
	up := strings.Replace(brokertest.Endpoint(t, srv, "mqtt"), "mqtt://", "tcp://", 1)
	dir := t.TempDir()
	keys := filepath.Join(dir, "ticket.keys")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(keys, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond) // past the gateway's check interval (1 s)
	}
	write(strings.Repeat("11", 32) + "\n")
	logs := &lockedLog{}
	g, err := gateway.New(gateway.Options{
		Routes:   []gateway.Route{{Listen: "quic://127.0.0.1:0", Upstreams: []string{up}}},
		StateDir: filepath.Join(dir, "gw"),
		TLS:      gateway.TLSOptions{TicketKeysFile: keys},
		Logger:   slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), iotqtest.Scale(60*time.Second))
	defer cancel()
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	url, cache := g.Endpoints()[0], filepath.Join(dir, "tickets")
	check := func(name string, want bool) {
		t.Helper()
		info := connectOnce(ctx, t, name, url, g.CAFile(), cache)
		if info.Used0RTT != want || info.TLSResumed != want {
			t.Errorf("%s: Used0RTT %v TLSResumed %v; want 0-RTT %v", name, info.Used0RTT, info.TLSResumed, want)
		}
	}
	check("first contact", false)
	check("same keys", true)
	write("# rotated: the old key removed\n" + strings.Repeat("22", 32) + "\n")
	check("old ticket after the reload", false)
	check("ticket issued after the reload", true)
	if !strings.Contains(logs.String(), "ticket keys reloaded") {
		t.Errorf("no reload logged:\n%s", logs.String())
	}
	write("not a key\n")
	check("after a broken file", true)
	if l := logs.String(); !strings.Contains(l, "not reloaded; the keys in use stay") || !strings.Contains(l, "want 64 hex digits") {
		t.Errorf("the broken file is not logged with its problem:\n%s", l)
	}
}

// TestTicketKeysFileOption: tls.ticket_keys_file in the YAML file; a key
// file others may read, or a bad line, is refused before the gateway
// starts, naming the key and what to do.
func TestTicketKeysFileOption(t *testing.T) {
	dir := t.TempDir()
	key := strings.Repeat("5a", 32)
	good := filepath.Join(dir, "good.keys")
	if err := os.WriteFile(good, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := gateway.ParseConfig("gw.yaml", []byte("routes:\n  - {listen: quic://127.0.0.1:0, upstreams: [tcp://127.0.0.1:1883]}\ntls: {ticket_keys_file: "+good+"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if o.TLS.TicketKeysFile != good {
		t.Fatalf("ticket_keys_file %q", o.TLS.TicketKeysFile)
	}
	open := filepath.Join(dir, "open.keys")
	if err := os.WriteFile(open, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.keys")
	if err := os.WriteFile(bad, []byte(key+"\nnot-a-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{open: "chmod 600", bad: "bad.keys:2: want 64 hex digits"} {
		_, err := gateway.New(gateway.Options{
			Routes:   []gateway.Route{{Listen: "quic://127.0.0.1:0", Upstreams: []string{"tcp://127.0.0.1:1883"}}},
			StateDir: t.TempDir(),
			TLS:      gateway.TLSOptions{TicketKeysFile: file},
		})
		if err == nil || !strings.Contains(err.Error(), "tls.ticket_keys_file") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v; want tls.ticket_keys_file and %q", filepath.Base(file), err, want)
		}
	}
}
