package gateway

import (
	"bytes"
	"crypto/tls"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/iotq/iotq/internal/certs"
)

// ticketKeysCheckEvery is how often, at most, tls.ticket_keys_file is
// read again for a rotation.
const ticketKeysCheckEvery = time.Second

// ticketReloader installs the keys of tls.ticket_keys_file in the base TLS
// configuration again whenever the file's content changes, so an operator
// rotates keys without restarting gateways. It runs in the ticket hooks of
// the handshakes (no goroutine): a gateway without handshakes issues and
// reads no tickets, so a check on the next handshake is soon enough. A file
// that no longer loads keeps the keys in use and logs why. A nil
// ticketReloader does nothing.
type ticketReloader struct {
	path string
	cfg  *tls.Config // every route encrypts and decrypts with its keys
	log  *slog.Logger

	mu      sync.Mutex
	checked time.Time
	last    []byte // content of the file last seen
}

func newTicketReloader(path string, cfg *tls.Config, log *slog.Logger) *ticketReloader {
	r := &ticketReloader{path: path, cfg: cfg, log: log}
	r.check(true)
	return r
}

// refresh reads the file again if ticketKeysCheckEvery has passed since
// the last check.
func (r *ticketReloader) refresh() {
	if r != nil {
		r.check(false)
	}
}

func (r *ticketReloader) check(force bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if !force && now.Sub(r.checked) < ticketKeysCheckEvery {
		return
	}
	r.checked = now
	b, err := os.ReadFile(r.path)
	if err != nil || bytes.Equal(b, r.last) {
		if err != nil && r.last != nil {
			r.log.Warn("ticket key file unreadable; the keys in use stay", "file", r.path, "error", err)
			r.last = nil // log once per change, not per check
		}
		return
	}
	r.last = b
	keys, err := certs.LoadTicketKeysFile(r.path)
	if err != nil {
		r.log.Warn("ticket key file not reloaded; the keys in use stay", "file", r.path, "error", err)
		return
	}
	r.cfg.SetSessionTicketKeys(keys)
	if !force {
		r.log.Info("ticket keys reloaded", "file", r.path, "keys", len(keys))
	}
}
