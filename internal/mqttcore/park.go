// SPDX-License-Identifier: MIT

package mqttcore

import (
	"errors"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// Parking idle clients. [iotq patch 18]
//
// Upstream runs one goroutine per client, blocked in a read for the whole
// life of the connection, so an idle client costs a goroutine stack. A
// client served by ServeConnection whose connection exposes a plain socket
// (syscall.Conn: *net.TCPConn, *net.UnixConn; not TLS, WebSocket or QUIC
// streams, which hold data of their own) gives its goroutine up once it
// has sent nothing for Options.ParkIdleAfter with no partial packet
// buffered: its socket is registered, one-shot, with the server's poller
// (epoll on Linux; no parking elsewhere), and a new goroutine continues
// reading when data arrives, when the keep-alive deadline passes (a timer)
// or when the client is stopped (Client.Stop wakes it). Writes are not
// affected: the write goroutine runs only while packets are queued
// (patch 11). The read that continues sees exactly what the blocked read
// would have seen (the same keep-alive deadline, the same close error), so
// Wills, takeovers and metrics behave as before.
//
// A connection that is no socket but whose data is received by goroutines
// of its own (multi-stream QUIC: the transport reads the streams and
// queues what they bring) parks the same way when it implements
// readNotifier: instead of the poller, the connection itself wakes the
// client, once, when a Read would no longer block. [iotq patch 38]

// errParked is returned by Client.read when the client gave its goroutine
// up; another goroutine continues it.
var errParked = errors.New("client parked")

// Run states of a parked client (clientPark.state).
const (
	parkRunning int32 = iota // a goroutine owns the client
	parkParked               // no goroutine: the first wake starts one
	parkWoken                // running, and woken meanwhile: do not park
)

// clientPark is the parking state of a client served by ServeConnection
// on a parkable connection.
type clientPark struct {
	p       *poller
	rc      syscall.RawConn // the socket (poller), or nil
	rn      readNotifier    // or the connection that wakes the client [iotq patch 38]
	state   atomic.Int32
	token   uint64      // the poller's key for this client, 0 before the first park
	timer   *time.Timer // wakes the client at its keep-alive deadline
	expiry  time.Time   // keep-alive deadline of the current wait; zero: none
	counted bool        // Info.ClientsConnected counts the client (see attachClient)
	ended   func(error) // called once when the client ends
	waking  atomic.Bool // woken from parked, input not yet handled (settle) [iotq patch 39]
}

// readNotifier is a connection that can wake a parked client itself.
// [iotq patch 38]
type readNotifier interface {
	// NotifyReadable arranges for f to be called once, on any goroutine,
	// as soon as a Read would not block (data, the end of the stream, an
	// error, Close); at once if that is so already. NotifyReadable(nil)
	// drops the registration and reports whether the connection can
	// notify at all. false: it cannot now (the client keeps its
	// goroutine for this wait).
	NotifyReadable(f func()) bool
}

// parkableConn returns the raw socket of c when c's reads come straight
// from it.
func parkableConn(c net.Conn) (syscall.RawConn, bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, false
	}
	rc, err := sc.SyscallConn()
	if err != nil || rc == nil {
		return nil, false
	}
	return rc, true
}

// ServeConnection runs the client of c, accepted by listener, like
// EstablishConnection, but may return before the client ends: an idle
// client on a parkable connection gives its goroutine up (see above).
// ended is called exactly once, when the client has ended, with what
// EstablishConnection would have returned, from whichever goroutine ran
// the client last (before ServeConnection returns when the client never
// parked). [iotq patch 18]
func (s *Server) ServeConnection(listener string, c net.Conn, ended func(error)) {
	cl := s.NewClient(c, listener, "", false)
	if s.poller != nil && ended != nil {
		if rc, ok := parkableConn(c); ok {
			cl.park = &clientPark{p: s.poller, rc: rc, ended: ended}
		} else if rn, ok := c.(readNotifier); ok && rn.NotifyReadable(nil) { // [iotq patch 38]
			cl.park = &clientPark{p: s.poller, rn: rn, ended: ended}
		}
	}
	err := s.serveClient(cl, listener)
	if errors.Is(err, errParked) {
		return
	}
	if ended != nil {
		ended(err)
	}
}

// serveClient is attachClient that may park (errParked).
func (s *Server) serveClient(cl *Client, listener string) error {
	s.Listeners.ClientsWg.Add(1)
	counted, err := s.connectClient(cl, listener)
	if err == nil {
		if cl.park != nil {
			cl.park.counted = counted // before a resumed goroutine may read it
		}
		err = cl.Read(s.receivePacket)
		if errors.Is(err, errParked) {
			return err
		}
		err = s.detachClient(cl, listener, err)
	}
	s.endClient(cl, &counted)
	return err
}

// resumeClient continues a parked client on a goroutine of its own.
func (s *Server) resumeClient(cl *Client) {
	err := cl.read(s.receivePacket, true)
	if errors.Is(err, errParked) {
		return
	}
	err = s.detachClient(cl, cl.Net.Listener, err)
	s.endClient(cl, &cl.park.counted)
	cl.park.ended(err)
}

// waitOrPark waits up to Options.ParkIdleAfter for the first byte of the
// next packet and parks the client if none came. The connection's read
// deadline is the keep-alive deadline (park.expiry) whenever this returns.
func (cl *Client) waitOrPark() (byte, error) {
	pk := cl.park
	for {
		linger := time.Now().Add(cl.ops.options.ParkIdleAfter)
		if !pk.expiry.IsZero() && !linger.Before(pk.expiry) {
			// The keep-alive deadline comes first (or has passed):
			// wait for it as upstream does.
			return cl.Net.bconn.ReadByte()
		}
		_ = cl.Net.Conn.SetReadDeadline(linger)
		b, err := cl.Net.bconn.ReadByte()
		_ = cl.Net.Conn.SetReadDeadline(pk.expiry)
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			return b, err
		}
		switch pk.park(cl) {
		case parkParked:
			return 0, errParked
		case parkRunning: // could not register: the connection is closed
			return cl.Net.bconn.ReadByte()
		}
		// Woken while parking: wait again.
	}
}

// park registers cl with the poller and gives the goroutine up. It
// returns parkParked when it did (another goroutine continues cl),
// parkWoken when cl was woken meanwhile and parkRunning when cl cannot
// park (closed); in both the caller keeps reading.
func (pk *clientPark) park(cl *Client) int32 {
	pk.state.Store(parkRunning) // wakes so far are stale: this goroutine was reading
	pk.handled()                // a wake that brought nothing: done with it [iotq patch 39]
	if cl.Closed() {
		return parkRunning
	}
	cl.Net.bconn.idle()
	if !pk.expiry.IsZero() {
		d := time.Until(pk.expiry)
		if pk.timer == nil {
			pk.timer = time.AfterFunc(d, cl.wakeParked)
		} else {
			pk.timer.Reset(d)
		}
	}
	if err := pk.arm(cl); err != nil {
		pk.stopTimer()
		return parkRunning
	}
	if pk.state.CompareAndSwap(parkRunning, parkParked) {
		return parkParked // from here on, cl belongs to whoever wakes it
	}
	pk.stopTimer()
	return parkWoken
}

// arm asks for one wake: from the poller, or from the connection itself.
// An error means the client cannot park now. [iotq patch 38]
func (pk *clientPark) arm(cl *Client) error {
	if pk.rn == nil {
		return pk.p.arm(cl)
	}
	if !pk.rn.NotifyReadable(cl.wakeParked) {
		return errCannotNotify
	}
	return nil
}

// errCannotNotify: the connection cannot wake the client now (a QUIC
// stream whose 0-RTT hold is not released yet). [iotq patch 38]
var errCannotNotify = errors.New("connection cannot notify")

func (pk *clientPark) stopTimer() {
	if pk.timer != nil {
		pk.timer.Stop()
	}
}

// wakeParked continues cl on a new goroutine if it is parked, or tells
// the goroutine running it not to park now. Safe to call at any time, from
// any goroutine, any number of times.
func (cl *Client) wakeParked() {
	pk := cl.park
	if pk == nil {
		return
	}
	for {
		switch pk.state.Load() {
		case parkParked:
			if pk.state.CompareAndSwap(parkParked, parkRunning) {
				pk.stopTimer()
				pk.p.woke(pk) // [iotq patch 39]
				go pk.p.resume(cl)
				return
			}
		case parkRunning:
			if pk.state.CompareAndSwap(parkRunning, parkWoken) {
				return
			}
		default:
			return
		}
	}
}

// release drops the client's registration; called once, by the goroutine
// that ends the client.
func (pk *clientPark) release() {
	pk.stopTimer()
	pk.handled() // [iotq patch 39]
	if pk.rn != nil {
		pk.rn.NotifyReadable(nil) // [iotq patch 38]
		return
	}
	pk.p.forget(pk)
}

// handled tells the poller that the input which woke the client has been
// handled (or that the client ends), so a settle waits for it no longer.
// Called by the goroutine running the client; one atomic load unless the
// client was just woken. [iotq patch 39]
func (pk *clientPark) handled() {
	if pk.waking.Load() {
		pk.p.handled(pk)
	}
}

// settleMax bounds how long a CONNECT waits for woken parked clients
// (Server.settleParked). It is reached only when a woken client's input
// keeps it busy (a stream of packets that never lets its buffer run dry)
// or when no CPU is free for it; the CONNECT then goes on.
const settleMax = 100 * time.Millisecond
