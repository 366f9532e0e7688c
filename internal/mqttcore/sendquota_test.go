// SPDX-License-Identifier: MIT

package mqttcore

import (
	"testing"

	"github.com/iotq/iotq/internal/mqttcore/packets"
)

// A delivery under the client's Receive Maximum either takes a unit of the
// send quota or waits, never both, and waiting ones go oldest first, each
// with a unit of quota. [iotq patch 61]
func TestSendQuotaTakenOnlyBySentMessages(t *testing.T) {
	in := NewInflights()
	in.ResetSendQuota(2)
	noExpiry := func(*packets.Packet) int64 { return 0 }
	put := func(id uint16) uint64 {
		pk := packets.Packet{PacketID: id, FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}}
		in.SetSeq(&pk)
		return pk.Seq
	}
	if in.waitOrTakeQuota(1, put(1)) {
		t.Fatal("the first message waits with quota to spare")
	}
	in.markWaiting(2, put(2)) // held back, as by a resend
	if !in.waitOrTakeQuota(3, put(3)) {
		t.Fatal("a new message was sent past an older one waiting [MQTT-4.6.0-6]")
	}
	if got := in.sendQuota; got != 1 {
		t.Fatalf("send quota %d after one message sent of 2, want 1: a waiting message took quota", got)
	}
	if pk, ok := in.releaseNext(noExpiry); !ok || pk.PacketID != 2 {
		t.Fatalf("releaseNext: %d %v, want the oldest waiting, 2", pk.PacketID, ok)
	}
	if _, ok := in.releaseNext(noExpiry); ok {
		t.Fatal("releaseNext let a message go with the quota used up [MQTT-3.3.4-9]")
	}
	in.IncreaseSendQuota() // a PUBACK
	if pk, ok := in.releaseNext(noExpiry); !ok || pk.PacketID != 3 {
		t.Fatalf("releaseNext after a PUBACK: %d %v, want 3", pk.PacketID, ok)
	}
	if in.anyWaiting() {
		t.Fatal("a message still waits")
	}

	in.IncreaseSendQuota()
	in.beginResend()
	if !in.waitOrTakeQuota(4, put(4)) {
		t.Fatal("a delivery during a reconnect's resend was sent ahead of it")
	}
	if _, ok := in.releaseNext(noExpiry); ok {
		t.Fatal("releaseNext let a message go during the resend")
	}
	in.endResend()
	if pk, ok := in.releaseNext(noExpiry); !ok || pk.PacketID != 4 {
		t.Fatalf("releaseNext after the resend: %d %v, want 4", pk.PacketID, ok)
	}
}
