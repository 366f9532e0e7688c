package transport

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/iotq/iotq/internal/atomicfile"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// prefixedCache keys another cache by transport and address, so tickets of
// QUIC and of TLS over TCP, or of two brokers on one host, never mix.
type prefixedCache struct {
	prefix string
	c      tls.ClientSessionCache
}

func (p prefixedCache) Get(key string) (*tls.ClientSessionState, bool) {
	return p.c.Get(p.prefix + key)
}
func (p prefixedCache) Put(key string, cs *tls.ClientSessionState) { p.c.Put(p.prefix+key, cs) }

// fileCacheMaxEntries bounds the file; the oldest entries go first.
const fileCacheMaxEntries = 256

// FileSessionCache is a tls.ClientSessionCache that keeps session tickets
// in a file, so a new process resumes the TLS session (and with QUIC sends
// 0-RTT data) where the last one left off.
//
// Put stores in memory at once and writes the file right behind it from a
// short-lived goroutine (temporary file + rename, mode 0600: it holds
// resumption secrets; merged with what other processes wrote meanwhile), so
// the file write never delays the connection that received the ticket.
// Closing a Conn that Dial made with this cache flushes it; Flush and Close
// do so explicitly (call one before exiting if conns may still be open). A missing, unreadable or corrupt file or entry is a cache miss,
// never an error. Safe for concurrent use.
type FileSessionCache struct {
	path string
	log  *slog.Logger

	mu      sync.Mutex
	idle    *sync.Cond // signalled when writing becomes false; uses mu
	entries map[string]fileCacheEntry
	removed map[string]bool // deleted since the last write
	dirty   bool            // entries changed since the last write
	writing bool            // a writer goroutine runs
	closed  bool            // after Close, Put writes synchronously
}

// fileCacheEntry is one stored ticket: the ticket as sent by the server
// and the state from tls.SessionState.Bytes (which keeps quic-go's
// transport parameters in its Extra field).
//
// Value holds instead an opaque session of another kind (SetValue: DTLS
// sessions of coaps://); such entries have no Ticket or State.
type fileCacheEntry struct {
	Ticket []byte    `json:"ticket"`
	State  []byte    `json:"state"`
	Value  []byte    `json:"value,omitempty"`
	Saved  time.Time `json:"saved"`
}

type fileCacheFile struct {
	Version int                       `json:"version"`
	Entries map[string]fileCacheEntry `json:"entries"`
}

// NewFileSessionCache opens the cache stored at path (created on the first
// Put). logger may be nil. It fails only if the directory of path cannot be
// created.
func NewFileSessionCache(path string, logger *slog.Logger) (*FileSessionCache, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if path == "" {
		return nil, errors.New("session cache: empty file name")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("session cache %s: %w", path, err)
	}
	c := &FileSessionCache{path: path, log: logger.With("component", "sessioncache", "file", path), removed: map[string]bool{}}
	c.idle = sync.NewCond(&c.mu)
	c.entries = c.load()
	return c, nil
}

// load reads the file; any problem yields an empty map.
func (c *FileSessionCache) load() map[string]fileCacheEntry {
	b, err := os.ReadFile(c.path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			c.log.Warn("session cache unreadable; starting empty", "error", err)
		}
		return map[string]fileCacheEntry{}
	}
	var f fileCacheFile
	if err := json.Unmarshal(b, &f); err != nil || f.Version != 1 || f.Entries == nil {
		c.log.Warn("session cache corrupt; starting empty", "error", err)
		return map[string]fileCacheEntry{}
	}
	return f.Entries
}

// Get returns the stored session for key, or a miss.
func (c *FileSessionCache) Get(key string) (*tls.ClientSessionState, bool) {
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	if e.State == nil {
		return nil, false // a SetValue entry
	}
	st, err := tls.ParseSessionState(e.State)
	if err != nil {
		c.log.Debug("session cache entry unusable", "key", key, "error", err)
		return nil, false
	}
	cs, err := tls.NewResumptionState(e.Ticket, st)
	if err != nil {
		c.log.Debug("session cache entry unusable", "key", key, "error", err)
		return nil, false
	}
	return cs, true
}

// Put stores (or, with cs nil, removes) the session for key and writes the
// file.
func (c *FileSessionCache) Put(key string, cs *tls.ClientSessionState) {
	var e fileCacheEntry
	if cs != nil {
		ticket, st, err := cs.ResumptionState()
		if err != nil || st == nil {
			c.log.Debug("session not resumable; not stored", "key", key, "error", err)
			return
		}
		b, err := st.Bytes()
		if err != nil {
			c.log.Debug("session not storable", "key", key, "error", err)
			return
		}
		e = fileCacheEntry{Ticket: ticket, State: b, Saved: time.Now().UTC()}
	}
	c.store(key, e, cs == nil)
}

// Value returns the opaque session stored with SetValue under key, or a
// miss. Callers choose keys that never collide with TLS ones (e.g. a
// "dtls|" prefix).
func (c *FileSessionCache) Value(key string) ([]byte, bool) {
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if !ok || e.Value == nil {
		return nil, false
	}
	return append([]byte(nil), e.Value...), true
}

// SetValue stores (or, with v nil, removes) an opaque session of another
// kind than TLS tickets (the DTLS sessions of coaps://) and writes the file
// like Put.
func (c *FileSessionCache) SetValue(key string, v []byte) {
	e := fileCacheEntry{Value: append([]byte(nil), v...), Saved: time.Now().UTC()}
	c.store(key, e, v == nil)
}

// store puts e under key (or removes key) and starts the file writer.
func (c *FileSessionCache) store(key string, e fileCacheEntry, remove bool) {
	c.mu.Lock()
	if remove {
		delete(c.entries, key)
		c.removed[key] = true
	} else {
		c.entries[key] = e
		delete(c.removed, key)
	}
	c.dirty = true
	if c.closed {
		c.mu.Unlock()
		c.writeOnce()
		return
	}
	if !c.writing {
		c.writing = true
		go c.writer()
	}
	c.mu.Unlock()
}

// writer writes the file until no change is pending, then ends.
func (c *FileSessionCache) writer() {
	for c.writeOnce() {
	}
	c.mu.Lock()
	c.writing = false
	c.idle.Broadcast()
	c.mu.Unlock()
}

// writeOnce writes pending changes; it returns false if there were none.
func (c *FileSessionCache) writeOnce() bool {
	c.mu.Lock()
	if !c.dirty {
		c.mu.Unlock()
		return false
	}
	c.dirty = false
	mine := make(map[string]fileCacheEntry, len(c.entries))
	for k, v := range c.entries {
		mine[k] = v
	}
	removed := c.removed
	c.removed = map[string]bool{}
	c.mu.Unlock()

	// Merge with what other processes saved since we loaded.
	merged := c.load()
	for k := range removed {
		delete(merged, k)
	}
	for k, v := range mine {
		if old, ok := merged[k]; !ok || !old.Saved.After(v.Saved) {
			merged[k] = v
		}
	}
	for len(merged) > fileCacheMaxEntries {
		oldest := ""
		for k, v := range merged {
			if oldest == "" || v.Saved.Before(merged[oldest].Saved) {
				oldest = k
			}
		}
		delete(merged, oldest)
	}
	if err := c.write(merged); err != nil {
		c.log.Warn("session cache not saved; the next process will do a full handshake", "error", err)
	}
	c.mu.Lock()
	for k, v := range merged {
		if cur, ok := c.entries[k]; !ok && !c.removed[k] || ok && v.Saved.After(cur.Saved) {
			c.entries[k] = v
		}
	}
	c.mu.Unlock()
	return true
}

// Flush waits until every Put so far is written to the file.
func (c *FileSessionCache) Flush() {
	c.mu.Lock()
	for c.writing {
		c.idle.Wait()
	}
	c.mu.Unlock()
}

// Close flushes; later Puts write synchronously. Idempotent, nil-safe.
func (c *FileSessionCache) Close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.Flush()
	return nil
}

// write replaces the file with entries. Only one writer runs at a time
// (writer goroutine, or Put after Close with no writer left).
func (c *FileSessionCache) write(entries map[string]fileCacheEntry) error {
	b, err := json.Marshal(fileCacheFile{Version: 1, Entries: entries})
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(c.path, b, 0o600)
}

// Len returns the number of stored sessions.
func (c *FileSessionCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
