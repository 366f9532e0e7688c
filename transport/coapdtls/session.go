package coapdtls

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/pion/dtls/v3"
)

// DTLS 1.2 session resumption (RFC 5246 section 7.3, abbreviated
// handshake): the server gives each full handshake a session ID and keeps
// its master secret; a client that offers that ID again skips the key
// exchange (and, with certificates, the certificate): one flight pair
// less.

// Server-side defaults (Config.Sessions, Config.SessionLifetime).
const (
	DefaultSessions        = 10000
	DefaultSessionLifetime = 24 * time.Hour
)

// serverSessions is the listener's session store: a bounded, expiring map
// from session ID to master secret and to the PSK identity the session was
// authenticated with (a resumed handshake carries no identity of its own,
// yet the broker's ACL needs it). A session becomes resumable only once the
// listener has bound its identity after the full handshake completed.
type serverSessions struct {
	max      int
	lifetime time.Duration
	now      func() time.Time

	mu    sync.Mutex
	m     map[string]*serverSession
	order []string // insertion order, for eviction (may hold deleted ids)
}

type serverSession struct {
	secret   []byte
	identity string
	bound    bool // the full handshake completed; resumable
	created  time.Time
}

func newServerSessions(max int, lifetime time.Duration) *serverSessions {
	return &serverSessions{max: max, lifetime: lifetime, now: time.Now, m: map[string]*serverSession{}}
}

// Set is called by pion/dtls at the end of a full handshake.
func (s *serverSessions) Set(key []byte, sess dtls.Session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := string(key)
	if _, ok := s.m[k]; !ok {
		s.order = append(s.order, k)
	}
	s.m[k] = &serverSession{secret: append([]byte(nil), sess.Secret...), created: s.now()}
	for len(s.m) > s.max && len(s.order) > 0 {
		delete(s.m, s.order[0])
		s.order = s.order[1:]
	}
	if len(s.order) > 2*s.max+16 { // drop ids deleted meanwhile
		live := s.order[:0]
		for _, id := range s.order {
			if _, ok := s.m[id]; ok {
				live = append(live, id)
			}
		}
		s.order = live
	}
	return nil
}

// Get is called by pion/dtls when a ClientHello offers a session ID. A
// miss (zero Session) means a full handshake.
func (s *serverSessions) Get(key []byte) (dtls.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[string(key)]
	if !ok || !e.bound {
		return dtls.Session{}, nil
	}
	if s.now().Sub(e.created) > s.lifetime {
		delete(s.m, string(key))
		return dtls.Session{}, nil
	}
	return dtls.Session{ID: append([]byte(nil), key...), Secret: append([]byte(nil), e.secret...)}, nil
}

// Del is called by pion/dtls when a session failed (fatal alert).
func (s *serverSessions) Del(key []byte) error {
	s.mu.Lock()
	delete(s.m, string(key))
	s.mu.Unlock()
	return nil
}

// completed is called by the listener after a successful handshake with
// its session ID and the identity the handshake carried. It returns whether
// the handshake resumed a session and the session's identity: for a full
// handshake, identity (now bound to the session); for a resumed one, the
// identity of the full handshake that created it.
func (s *serverSessions) completed(id []byte, identity string) (resumed bool, sessionIdentity string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[string(id)]
	switch {
	case !ok || len(id) == 0:
		return false, identity // not stored (evicted at once): not resumable
	case e.bound:
		return true, e.identity
	default:
		e.identity, e.bound = identity, true
		return false, identity
	}
}

// Len is the number of stored sessions.
func (s *serverSessions) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// SessionCache keeps a client's resumable DTLS sessions across
// connections and processes; transport.FileSessionCache (the file of
// --session-cache) implements it. Safe for concurrent use.
type SessionCache interface {
	// Value returns the value stored under key, or a miss.
	Value(key string) ([]byte, bool)
	// SetValue stores v under key; nil removes it.
	SetValue(key string, v []byte)
}

// MemorySessionCache is a SessionCache in memory (one process).
type MemorySessionCache struct {
	mu sync.Mutex
	m  map[string][]byte
}

// Value implements SessionCache.
func (m *MemorySessionCache) Value(key string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.m[key]
	return v, ok
}

// SetValue implements SessionCache.
func (m *MemorySessionCache) SetValue(key string, v []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[string][]byte{}
	}
	if v == nil {
		delete(m.m, key)
		return
	}
	m.m[key] = append([]byte(nil), v...)
}

// clientSessions adapts a SessionCache to pion/dtls's SessionStore for one
// dial. Keys carry what must match for a session to be offered again:
// the PSK identity and a digest of its key, or for certificates the server
// name and whether the certificate was verified (a session made without
// verification is never offered to a verified dial). pion's own key adds
// the server's address.
type clientSessions struct {
	c      SessionCache
	prefix string

	mu         sync.Mutex
	offered    []byte // session ID offered in the ClientHello (nil: none)
	offeredKey []byte // pion's key it was stored under
}

func newClientSessions(c SessionCache, cc ClientConfig) *clientSessions {
	prefix := "dtls|"
	if cc.Identity != "" {
		sum := sha256.Sum256(cc.Key)
		prefix += "psk|" + hex.EncodeToString([]byte(cc.Identity)) + "|" + hex.EncodeToString(sum[:8]) + "|"
	} else {
		name, verified := "", true
		if cc.TLSConfig != nil {
			name, verified = cc.TLSConfig.ServerName, !cc.TLSConfig.InsecureSkipVerify
		}
		if verified {
			prefix += "cert|" + name + "|"
		} else {
			prefix += "cert-unverified|" + name + "|"
		}
	}
	return &clientSessions{c: c, prefix: prefix}
}

// encodeSession: 1 byte ID length, ID, secret.
func encodeSession(s dtls.Session) []byte {
	b := make([]byte, 0, 1+len(s.ID)+len(s.Secret))
	b = append(b, byte(len(s.ID)))
	b = append(b, s.ID...)
	return append(b, s.Secret...)
}

func decodeSession(b []byte) (dtls.Session, error) {
	if len(b) < 1 || len(b) < 1+int(b[0]) || b[0] == 0 || len(b) == 1+int(b[0]) {
		return dtls.Session{}, errors.New("bad stored DTLS session")
	}
	n := int(b[0])
	return dtls.Session{ID: append([]byte(nil), b[1:1+n]...), Secret: append([]byte(nil), b[1+n:]...)}, nil
}

func (c *clientSessions) Set(key []byte, s dtls.Session) error {
	if len(s.ID) == 0 || len(s.ID) > 255 {
		return nil
	}
	c.c.SetValue(c.prefix+string(key), encodeSession(s))
	return nil
}

func (c *clientSessions) Get(key []byte) (dtls.Session, error) {
	v, ok := c.c.Value(c.prefix + string(key))
	if !ok {
		return dtls.Session{}, nil
	}
	s, err := decodeSession(v)
	if err != nil {
		c.c.SetValue(c.prefix+string(key), nil)
		return dtls.Session{}, nil // a miss, never an error
	}
	c.mu.Lock()
	c.offered, c.offeredKey = s.ID, append([]byte(nil), key...)
	c.mu.Unlock()
	return s, nil
}

// Del: pion calls it with its session key after a fatal alert, and with
// the offered session ID when the server did not resume it; either way the
// stored session of this dial is dropped.
func (c *clientSessions) Del(key []byte) error {
	c.mu.Lock()
	offered, offeredKey := c.offered, c.offeredKey
	c.mu.Unlock()
	if offered != nil && string(key) == string(offered) {
		key = offeredKey
	}
	c.c.SetValue(c.prefix+string(key), nil)
	return nil
}

// resumed reports whether the handshake resumed the offered session.
func (c *clientSessions) resumed(sessionID []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offered != nil && string(c.offered) == string(sessionID)
}
