package certs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// ticketKeyLen is the size of one session ticket key
// (tls.Config.SetSessionTicketKeys).
const ticketKeyLen = 32

// LoadOrCreateTicketKeys returns the session ticket keys stored in
// dir/tls/ticket.keys, creating the file (mode 0600) with one random key on
// first use. Install them with tls.Config.SetSessionTicketKeys: then tickets
// issued before a broker restart still resume (TLS) and still carry 0-RTT
// (QUIC) afterwards. The file is raw bytes, a multiple of 32; the first key
// encrypts new tickets, all keys decrypt.
func LoadOrCreateTicketKeys(dir string) ([][32]byte, error) {
	f := FilesIn(dir)
	if err := os.MkdirAll(f.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("certs: create %s: %w", f.Dir, err)
	}
	unlock, err := lockDir(f.Dir)
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	defer unlock()

	b, err := os.ReadFile(f.TicketKeys)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		b = make([]byte, ticketKeyLen)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("certs: generate ticket key: %w", err)
		}
		if err := writeFileAtomic(f.TicketKeys, b, 0o600); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("certs: read ticket keys: %w", err)
	}
	if len(b) == 0 || len(b)%ticketKeyLen != 0 {
		return nil, fmt.Errorf("certs: %s is %d bytes, want a non-zero multiple of %d (delete it to create a new key; clients then do one full handshake)", f.TicketKeys, len(b), ticketKeyLen)
	}
	keys := make([][32]byte, len(b)/ticketKeyLen)
	for i := range keys {
		copy(keys[i][:], b[i*ticketKeyLen:])
	}
	return keys, nil
}

// LoadTicketKeysFile reads session ticket keys that an operator shares
// between servers (several gateways behind one address): one key per line
// as 64 hex digits (32 bytes, e.g. from `openssl rand -hex 32`), blank
// lines and lines starting with # ignored. The first key encrypts new
// tickets, all keys decrypt (tls.Config.SetSessionTicketKeys), so a key is
// rotated in by adding it at the end everywhere, then moving it first, then
// removing the old key once its tickets expired (docs/deploy.md). The file
// must not be readable by group or others: whoever holds the keys can
// decrypt recorded sessions that resumed with them.
func LoadTicketKeysFile(path string) ([][32]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("certs: ticket key file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("certs: ticket key file %s has mode %v: group and others may read the keys; chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("certs: ticket key file: %w", err)
	}
	var keys [][32]byte
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := hex.DecodeString(line)
		if err != nil || len(k) != ticketKeyLen {
			return nil, fmt.Errorf("certs: %s:%d: want %d hex digits (a %d-byte key, e.g. from `openssl rand -hex %d`), got %d characters", path, i+1, 2*ticketKeyLen, ticketKeyLen, ticketKeyLen, len(line))
		}
		keys = append(keys, [32]byte(k))
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("certs: ticket key file %s holds no key; add one line from `openssl rand -hex %d`", path, ticketKeyLen)
	}
	return keys, nil
}
