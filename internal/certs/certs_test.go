package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func fileMode(t *testing.T, name string) os.FileMode {
	t.Helper()
	st, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEnsureServerCertCreatesReusesAndReissues(t *testing.T) {
	dir := t.TempDir()
	f, err := EnsureServerCert(dir, []string{"localhost", "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if f.CA != filepath.Join(dir, "tls", "ca.pem") || f.Cert != filepath.Join(dir, "tls", "server.pem") {
		t.Fatalf("unexpected file names %+v", f)
	}
	for _, k := range []string{f.CAKey, f.Key} {
		if m := fileMode(t, k); m != 0o600 {
			t.Errorf("%s mode %v, want 0600", k, m)
		}
	}
	ca1, leaf1 := readFile(t, f.CA), readFile(t, f.Cert)

	// Second call, hosts covered: nothing changes.
	if _, err := EnsureServerCert(dir, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ca1, readFile(t, f.CA)) || !bytes.Equal(leaf1, readFile(t, f.Cert)) {
		t.Fatal("files changed although the hosts were covered")
	}

	// New host: same CA, new leaf covering old and new hosts.
	if _, err := EnsureServerCert(dir, []string{"10.9.8.7", "broker.lab"}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ca1, readFile(t, f.CA)) {
		t.Fatal("CA changed on leaf re-issue")
	}
	if bytes.Equal(leaf1, readFile(t, f.Cert)) {
		t.Fatal("leaf was not re-issued for a new host")
	}
	ok, err := Covers(f.Cert, []string{"localhost", "127.0.0.1", "10.9.8.7", "broker.lab"})
	if err != nil || !ok {
		t.Fatalf("re-issued leaf does not cover old+new hosts: %v %v", ok, err)
	}
	ok, _ = Covers(f.Cert, []string{"other.example"})
	if ok {
		t.Fatal("Covers says yes for a host never requested")
	}

	// The leaf verifies against the CA pool for every host.
	pool, err := CertPool(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"localhost", "10.9.8.7", "broker.lab"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: h}); err != nil {
			t.Errorf("verify for %s: %v", h, err)
		}
	}
}

func TestCertPoolRejectsNonPEM(t *testing.T) {
	name := filepath.Join(t.TempDir(), "x.pem")
	if err := os.WriteFile(name, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := CertPool(name); err == nil {
		t.Fatal("want error for a file without certificates")
	}
	if _, err := CertPool(name + ".missing"); err == nil {
		t.Fatal("want error for a missing file")
	}
}

func TestLocalHostsHasLoopback(t *testing.T) {
	h := LocalHosts()
	for _, want := range []string{"localhost", "127.0.0.1", "::1"} {
		if !slices.Contains(h, want) {
			t.Errorf("LocalHosts() = %v, missing %s", h, want)
		}
	}
}

func TestTicketKeysPersist(t *testing.T) {
	dir := t.TempDir()
	k1, err := LoadOrCreateTicketKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(k1) != 1 || k1[0] == ([32]byte{}) {
		t.Fatalf("want one non-zero key, got %v", k1)
	}
	if m := fileMode(t, FilesIn(dir).TicketKeys); m != 0o600 {
		t.Errorf("ticket.keys mode %v, want 0600", m)
	}
	k2, err := LoadOrCreateTicketKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(k1, k2) {
		t.Fatal("ticket keys changed between calls")
	}
	if err := os.WriteFile(FilesIn(dir).TicketKeys, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateTicketKeys(dir); err == nil {
		t.Fatal("want error for a corrupt ticket key file")
	}
}

// TestServerConfigResumesAcrossRestart checks the point of persistent ticket
// keys: a ticket from one server config resumes on a second one built from the
// same directory (a broker restart).
func TestServerConfigResumesAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	f, err := EnsureServerCert(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := CertPool(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	cache := tls.NewLRUClientSessionCache(4)
	dial := func(srv *tls.Config) bool {
		t.Helper()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		done := make(chan struct{})
		go func() {
			defer close(done)
			c, err := l.Accept()
			if err != nil {
				return
			}
			tc := tls.Server(c, srv)
			if tc.Handshake() == nil {
				_, _ = tc.Write([]byte("x")) // delivers the TLS 1.3 ticket
			}
			_, _ = io.Copy(io.Discard, tc)
			tc.Close()
		}()
		c, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "localhost", ClientSessionCache: cache})
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1)
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
		resumed := c.ConnectionState().DidResume
		c.Close()
		<-done
		return resumed
	}
	srv1, _, err := ServerConfig(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if dial(srv1) {
		t.Fatal("first connection resumed without a ticket")
	}
	srv2, _, err := ServerConfig(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !dial(srv2) {
		t.Fatal("ticket from the first server config did not resume on the second (ticket keys not persisted?)")
	}
}
