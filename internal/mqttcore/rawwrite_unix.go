// SPDX-License-Identifier: MIT

//go:build unix

package mqttcore

import (
	"net"
	"syscall"
)

// rawWriter writes to a plain socket without waiting. [iotq patch 40]
type rawWriter = *socketWriter

type socketWriter struct{ rc syscall.RawConn }

// newRawWriter returns c's socket when c's writes go straight to it
// (parkableConn), else nil.
func newRawWriter(c net.Conn) rawWriter {
	rc, ok := parkableConn(c)
	if !ok {
		return nil
	}
	return &socketWriter{rc: rc}
}

// writeNow writes what the socket's buffer takes at once, nothing if it
// is full or the write fails (the write goroutine that takes the rest
// over meets the error), and returns how much.
func (w *socketWriter) writeNow(p []byte) int {
	var n int
	err := w.rc.Write(func(fd uintptr) bool {
		n, _ = syscall.Write(int(fd), p)
		return true // never wait for the socket
	})
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// readNow reads what the socket holds now into p, without waiting: n > 0
// bytes, or 0 when nothing is waiting, the peer closed or the read
// failed (the blocking read that follows meets the end or the error).
// [iotq patch 46]
func (w *socketWriter) readNow(p []byte) int {
	var n int
	err := w.rc.Read(func(fd uintptr) bool {
		n, _ = syscall.Read(int(fd), p)
		return true // never wait for the socket
	})
	if err != nil || n < 0 {
		return 0
	}
	return n
}
