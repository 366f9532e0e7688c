package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"github.com/iotq/iotq/internal/atomicfile"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Validity periods of generated certificates.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 2 * 365 * 24 * time.Hour
	// renewBefore re-issues a leaf that expires within this period.
	renewBefore = 30 * 24 * time.Hour
)

// Files names the TLS files of a state directory.
type Files struct {
	Dir        string // DIR/tls
	CA         string // DIR/tls/ca.pem: give this to clients (--ca)
	CAKey      string // DIR/tls/ca-key.pem (0600)
	Cert       string // DIR/tls/server.pem: leaf certificate
	Key        string // DIR/tls/server-key.pem (0600)
	TicketKeys string // DIR/tls/ticket.keys (0600)
}

// FilesIn returns the file names used for the state directory dir, without
// touching the file system.
func FilesIn(dir string) Files {
	d := filepath.Join(dir, "tls")
	return Files{
		Dir:        d,
		CA:         filepath.Join(d, "ca.pem"),
		CAKey:      filepath.Join(d, "ca-key.pem"),
		Cert:       filepath.Join(d, "server.pem"),
		Key:        filepath.Join(d, "server-key.pem"),
		TicketKeys: filepath.Join(d, "ticket.keys"),
	}
}

// EnsureServerCert makes sure dir/tls holds a CA and a server certificate
// signed by it that covers every entry of hosts (DNS names or IP addresses).
// On the first call it creates both. Later calls reuse them; when a requested
// host is not covered, or the leaf expires within 30 days, the leaf is
// re-issued by the same CA for the union of its old and the new hosts, so
// clients that trust ca.pem keep working. nil or empty hosts means
// LocalHosts().
func EnsureServerCert(dir string, hosts []string) (Files, error) {
	f := FilesIn(dir)
	if len(hosts) == 0 {
		hosts = LocalHosts()
	}
	hosts = normalizeHosts(hosts)
	if err := os.MkdirAll(f.Dir, 0o700); err != nil {
		return f, fmt.Errorf("certs: create %s: %w", f.Dir, err)
	}
	unlock, err := lockDir(f.Dir)
	if err != nil {
		return f, fmt.Errorf("certs: %w", err)
	}
	defer unlock()

	caCert, caKey, err := loadCA(f)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		caCert, caKey, err = createCA(f)
		if err != nil {
			return f, err
		}
		// A new CA invalidates any old leaf.
		return f, issueLeaf(f, caCert, caKey, hosts)
	case err != nil:
		return f, err
	}

	leaf, err := loadCertFile(f.Cert)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return f, issueLeaf(f, caCert, caKey, hosts)
		}
		return f, err
	}
	if _, err := tls.LoadX509KeyPair(f.Cert, f.Key); err != nil {
		// Missing or mismatched key: issue a fresh pair.
		return f, issueLeaf(f, caCert, caKey, hosts)
	}
	if leaf.CheckSignatureFrom(caCert) != nil || time.Until(leaf.NotAfter) < renewBefore {
		return f, issueLeaf(f, caCert, caKey, hosts)
	}
	missing := false
	for _, h := range hosts {
		if leaf.VerifyHostname(h) != nil {
			missing = true
			break
		}
	}
	if !missing {
		return f, nil
	}
	return f, issueLeaf(f, caCert, caKey, normalizeHosts(append(certHosts(leaf), hosts...)))
}

// Covers reports whether the certificate in certFile is valid for every
// entry of hosts.
func Covers(certFile string, hosts []string) (bool, error) {
	c, err := loadCertFile(certFile)
	if err != nil {
		return false, err
	}
	for _, h := range normalizeHosts(hosts) {
		if c.VerifyHostname(h) != nil {
			return false, nil
		}
	}
	return true, nil
}

// ServerTLSConfig loads a certificate and key (PEM) into a server
// *tls.Config with TLS 1.2 as the minimum version. NextProtos is left to the
// transport. Callers that want resumption to survive restarts add
// SetSessionTicketKeys(LoadOrCreateTicketKeys(dir)).
func ServerTLSConfig(certFile, keyFile string) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("certs: load server certificate %s and key %s: %w (check that both files are PEM and belong together)", certFile, keyFile, err)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{pair},
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// ServerConfig is the one-call setup of a broker without its own
// certificate: EnsureServerCert(dir, hosts), ServerTLSConfig on the result,
// and the persistent ticket keys of dir installed. It returns the files so the
// caller can print f.CA for clients.
func ServerConfig(dir string, hosts []string) (*tls.Config, Files, error) {
	f, err := EnsureServerCert(dir, hosts)
	if err != nil {
		return nil, f, err
	}
	cfg, err := ServerTLSConfig(f.Cert, f.Key)
	if err != nil {
		return nil, f, err
	}
	keys, err := LoadOrCreateTicketKeys(dir)
	if err != nil {
		return nil, f, err
	}
	cfg.SetSessionTicketKeys(keys)
	return cfg, f, nil
}

// CertPool returns a pool holding the PEM certificates of caFile, for
// tls.Config.RootCAs of a client.
func CertPool(caFile string) (*x509.CertPool, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("certs: read CA file: %w", err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("certs: CA file %s holds no PEM certificate (want the ca.pem printed by the broker)", caFile)
	}
	return p, nil
}

// LocalHosts returns the names and addresses a broker on this machine (or in
// this network namespace) can be reached by: localhost, 127.0.0.1, ::1, the
// host name and every IP address of every local interface.
func LocalHosts() []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if h, err := os.Hostname(); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			var ip net.IP
			switch v := a.(type) {
			case *net.IPNet:
				ip = v.IP
			case *net.IPAddr:
				ip = v.IP
			}
			if ip != nil {
				hosts = append(hosts, ip.String())
			}
		}
	}
	return normalizeHosts(hosts)
}

// normalizeHosts lower-cases names, canonicalises IPs, drops empty entries
// and duplicates, and sorts.
func normalizeHosts(in []string) []string {
	out := make([]string, 0, len(in))
	for _, h := range in {
		h = strings.TrimSpace(h)
		h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
		if i := strings.IndexByte(h, '%'); i >= 0 { // IPv6 zone
			h = h[:i]
		}
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			h = ip.String()
		} else {
			h = strings.ToLower(h)
		}
		out = append(out, h)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// certHosts returns the SANs of c as strings.
func certHosts(c *x509.Certificate) []string {
	h := slices.Clone(c.DNSNames)
	for _, ip := range c.IPAddresses {
		h = append(h, ip.String())
	}
	return h
}

func loadCertFile(name string) (*x509.Certificate, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("certs: read %s: %w", name, err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("certs: %s holds no PEM certificate", name)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certs: parse %s: %w", name, err)
	}
	return c, nil
}

func loadKeyFile(name string) (*ecdsa.PrivateKey, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("certs: read %s: %w", name, err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("certs: %s holds no PEM key", name)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certs: parse %s: %w", name, err)
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("certs: %s: want an ECDSA key, got %T", name, k)
	}
	return ek, nil
}

func loadCA(f Files) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	c, err := loadCertFile(f.CA)
	if err != nil {
		return nil, nil, err
	}
	k, err := loadKeyFile(f.CAKey)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (delete %s to start over with a new CA)", err, f.Dir)
	}
	if !k.PublicKey.Equal(c.PublicKey) {
		return nil, nil, fmt.Errorf("certs: %s does not belong to %s (delete %s to start over with a new CA)", f.CAKey, f.CA, f.Dir)
	}
	return c, k, nil
}

func serial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certs: serial number: %w", err)
	}
	return s, nil
}

func createCA(f Files) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: generate CA key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: CA public key: %w", err)
	}
	ski := sha256.Sum256(pub)
	host, _ := os.Hostname()
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{Organization: []string{"iotq"}, CommonName: "iotq local CA " + host},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		SubjectKeyId:          ski[:20],
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: create CA certificate: %w", err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: parse new CA certificate: %w", err)
	}
	if err := writeKey(f.CAKey, key); err != nil {
		return nil, nil, err
	}
	if err := writePEM(f.CA, "CERTIFICATE", der, 0o644); err != nil {
		return nil, nil, err
	}
	return c, key, nil
}

func issueLeaf(f Files, ca *x509.Certificate, caKey *ecdsa.PrivateKey, hosts []string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("certs: generate server key: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{Organization: []string{"iotq"}, CommonName: "iotq broker"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if tmpl.NotAfter.After(ca.NotAfter) {
		tmpl.NotAfter = ca.NotAfter
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	if len(tmpl.DNSNames) > 0 {
		tmpl.Subject.CommonName = tmpl.DNSNames[0]
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("certs: create server certificate: %w", err)
	}
	// Key first: a reader that sees the new certificate also finds its key.
	// (Readers loading the pair between the two renames get a mismatch
	// error from tls.LoadX509KeyPair and can retry.)
	if err := writeKey(f.Key, key); err != nil {
		return err
	}
	return writePEM(f.Cert, "CERTIFICATE", der, 0o644)
}

func writeKey(name string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("certs: encode key: %w", err)
	}
	return writePEM(name, "PRIVATE KEY", der, 0o600)
}

func writePEM(name, typ string, der []byte, mode os.FileMode) error {
	return writeFileAtomic(name, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}

// writeFileAtomic writes data to name atomically (internal/atomicfile).
func writeFileAtomic(name string, data []byte, mode os.FileMode) error {
	if err := atomicfile.WriteFile(name, data, mode); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	return nil
}
