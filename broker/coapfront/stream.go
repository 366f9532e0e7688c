package coapfront

import (
	"bufio"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/plgd-dev/go-coap/v3/message"
	"github.com/plgd-dev/go-coap/v3/message/codes"

	"github.com/iotq/iotq/transport/coapmsg"
)

// streamConn is one RFC 8323 connection (TCP, TLS or a QUIC stream).
type streamConn struct {
	f    *Front
	c    net.Conn
	wmu  sync.Mutex
	name string
	tc   *transportCounters
}

func (s *streamConn) key() string                  { return s.name }
func (s *streamConn) counters() *transportCounters { return s.tc }
func (s *streamConn) confirmable() bool            { return false }
func (s *streamConn) send(m *message.Message, _ bool, done func(error)) (uint16, error) {
	err := s.write(m)
	if done != nil {
		done(err)
	}
	return 0, err
}

func (s *streamConn) write(m *message.Message) error {
	b, err := coapmsg.EncodeStream(m)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := s.c.Write(b); err != nil {
		return fmt.Errorf("coap stream write: %w", err)
	}
	return nil
}

// streamPeer carries the connection's identity for the ACL (TLS client
// certificates are not mapped: stream clients are anonymous).
type streamPeer struct{ net.Addr }

// ServeStream starts one RFC 8323 session on c (the front owns c) on a
// goroutine of the front and returns at once; Close ends it. Each side's
// first message is a CSM (7.01); Ping is answered with Pong; Release and
// Abort end the session. Its counters go under "coap+tcp"; ServeStreamOn
// names the listener's scheme.
func (f *Front) ServeStream(c net.Conn) { f.ServeStreamOn(c, "coap+tcp") }

// ServeStreamOn is ServeStream with the URL scheme of the listener
// (coap+tcp, coaps+tcp, coap+quic) that the per-transport counters use.
func (f *Front) ServeStreamOn(c net.Conn, scheme string) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		_ = c.Close()
		return
	}
	s := &streamConn{f: f, c: c, name: fmt.Sprintf("stream|%p", c), tc: f.countersLocked(scheme)}
	f.streams[s] = struct{}{}
	f.wg.Add(1)
	f.mu.Unlock()
	go f.serveStream(s)
}

func (f *Front) serveStream(s *streamConn) {
	c := s.c
	defer func() {
		f.dropSink(s.key())
		f.mu.Lock()
		delete(f.streams, s)
		f.mu.Unlock()
		_ = c.Close()
		f.wg.Done()
	}()
	csm := &message.Message{Code: codes.CSM}
	addUint(csm, 2, coapmsg.DefaultMaxMessageSize*1024)  // Max-Message-Size
	csm.Options = csm.Options.Add(message.Option{ID: 4}) // Block-Wise-Transfer
	if err := s.write(csm); err != nil {
		return
	}
	r := bufio.NewReader(c)
	first := true
	for {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Minute))
		m, err := coapmsg.ReadStreamMessage(r, coapmsg.DefaultMaxMessageSize*1024)
		if err != nil {
			if first {
				f.log.Debug("coap stream ended before CSM", "remote", c.RemoteAddr(), "error", err)
			}
			return
		}
		if first && m.Code != codes.CSM {
			abort := &message.Message{Code: codes.Abort, Payload: []byte("first message must be a CSM (RFC 8323 section 5.3)")}
			_ = s.write(abort)
			return
		}
		first = false
		switch m.Code {
		case codes.CSM:
			continue
		case codes.Ping:
			_ = s.write(&message.Message{Code: codes.Pong, Token: m.Token})
			continue
		case codes.Pong:
			continue
		case codes.Release, codes.Abort:
			return
		}
		if m.Code>>5 != 0 || m.Code == codes.Empty {
			continue // responses to us: we send no requests
		}
		var out *message.Message
		if coapmsg.UnknownCritical(m.Options) {
			out = resp(codes.BadOption, "unrecognized critical option")
		} else {
			out = f.handleOn(s, streamPeer{c.RemoteAddr()}, m)
		}
		if out == nil {
			continue
		}
		out.Token = m.Token
		if err := s.write(out); err != nil {
			return
		}
	}
}
