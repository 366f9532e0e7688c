// SPDX-License-Identifier: MIT

package mqttcore

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"

	"github.com/iotq/iotq/internal/mqttcore/packets"
)

// A panic while serving one client ends that client's connection, never
// the process: its read path (connect and every packet) and its write loop
// recover, count the panic in Info.ClientPanics and log it once with the
// client id and a bounded stack, never the packet bytes. [iotq patch 19]

// PanicError is the error a client's connection ends with when serving it
// panicked.
type PanicError struct {
	Value string // the panic value, bounded
	While string // what the connection was doing
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("internal error while %s (connection closed, broker continues): %s", e.While, e.Value)
}

const (
	maxPanicValue = 256
	maxPanicStack = 8 << 10
)

// recovered accounts for the panic value r, raised while serving cl, and
// returns the error that ends cl's connection.
func (cl *Client) recovered(r any, while string) error {
	atomic.AddInt64(&cl.ops.info.ClientPanics, 1)
	v := fmt.Sprint(r)
	if len(v) > maxPanicValue {
		v = v[:maxPanicValue] + "..."
	}
	stack := debug.Stack()
	if len(stack) > maxPanicStack {
		stack = stack[:maxPanicStack]
	}
	cl.ops.log.Error("panic while serving a client: its connection is closed, the broker continues",
		"client", cl.ID, "listener", cl.Net.Listener, "remote", cl.Net.Remote, "while", while, "panic", v, "stack", string(stack))
	return &PanicError{Value: v, While: while}
}

// refuseMalformed answers a packet that did not decode: an MQTT 5 client
// gets DISCONNECT with the reason code of the decode error (0x81 malformed
// packet, 0x82 protocol error, ...) before its connection closes (MQTT 5
// section 4.13.1); MQTT 3.1.1 has no way to say why, so its connection just
// closes. Read errors (a closed socket) are not answered.
func (cl *Client) refuseMalformed(err error) {
	var code packets.Code
	if cl.Properties.ProtocolVersion != 5 || !errors.As(err, &code) || code.Code < packets.ErrUnspecifiedError.Code {
		return
	}
	_ = cl.WritePacket(packets.Packet{
		FixedHeader: packets.FixedHeader{Type: packets.Disconnect},
		ReasonCode:  code.Code,
		Properties:  packets.Properties{ReasonString: code.Reason},
	})
}
