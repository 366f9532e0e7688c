package transport

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
)

// Listen starts a listener for the URL raw. Port 0 picks a free port; the
// Endpoint method returns the real one.
func Listen(raw string, opts ListenOptions) (Listener, error) {
	ep, err := ParseURL(raw)
	if err != nil {
		return nil, err
	}
	switch ep.Scheme {
	case SchemeTCP:
		l, err := net.Listen("tcp", ep.Address())
		if err != nil {
			return nil, fmt.Errorf("listen %s: %w", ep, err)
		}
		return newStreamListener(ep, l), nil
	}
	return nil, fmt.Errorf("listen %s: transport %q not implemented yet", ep, ep.Scheme)
}

// streamListener adapts a net.Listener (TCP, TLS) to Listener.
type streamListener struct {
	ep   Endpoint
	l    net.Listener
	once sync.Once
}

func newStreamListener(ep Endpoint, l net.Listener) *streamListener {
	if ta, ok := l.Addr().(*net.TCPAddr); ok {
		ep.Port = ta.Port
		if ep.Host == "" {
			ep.Host = ta.IP.String()
		}
	}
	return &streamListener{ep: ep, l: l}
}

func (s *streamListener) Accept(ctx context.Context) (net.Conn, error) {
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := s.l.Accept()
		ch <- res{c, err}
	}()
	select {
	case r := <-ch:
		return r.c, r.err
	case <-ctx.Done():
		// The pending Accept returns when the listener closes.
		return nil, ctx.Err()
	}
}

func (s *streamListener) Addr() net.Addr     { return s.l.Addr() }
func (s *streamListener) Endpoint() Endpoint { return s.ep }
func (s *streamListener) Close() error {
	var err error
	s.once.Do(func() { err = s.l.Close() })
	return err
}

var _ = strconv.Itoa
