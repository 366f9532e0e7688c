package certs

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
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
