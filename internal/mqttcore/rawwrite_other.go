// SPDX-License-Identifier: MIT

//go:build !unix

package mqttcore

import "net"

// rawWriter writes to a plain socket without waiting; not on this
// platform, where deliveries go to write goroutines. [iotq patch 40]
type rawWriter = *socketWriter

type socketWriter struct{}

func newRawWriter(net.Conn) rawWriter { return nil }

func (*socketWriter) writeNow([]byte) int { return 0 }

func (*socketWriter) readNow([]byte) int { return 0 }
