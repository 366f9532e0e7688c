// SPDX-License-Identifier: MIT

package mqttcore

import (
	"testing"
	"unsafe"
)

// TestClientFitsItsSizeClass: every connection, idle or not, holds one
// Client, allocated on its own. The runtime puts an object of more than
// 512 bytes that holds pointers in the size class of its size plus an
// 8-byte header: up to 760 bytes the 768-byte class, one byte more and
// the 896-byte class (128 bytes more per connection, about 3 % of an idle
// TCP connection's memory; issue 21's budget is 4 KB). A field added to
// Client, ClientState or the structs they hold must come with a saving
// elsewhere (fields ordered so no padding is left, or state allocated
// only when used). [iotq patch 55]
func TestClientFitsItsSizeClass(t *testing.T) {
	const limit = 768 - 8
	if n := unsafe.Sizeof(Client{}); n > limit {
		t.Errorf("Client is %d bytes, want at most %d (with the allocator's 8-byte header, the 768-byte size class; the next is 896)", n, limit)
	}
}
