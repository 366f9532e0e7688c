package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/internal/testutil"
)

// TestPubRefusedByACL: a QoS 1 publish the iotq broker's ACL refuses.
// MQTT 3.1.1 has no reason codes and the broker closes the connection, so
// pub says the ACL probably refused it (not only "connection lost"); MQTT
// 5 gets the reason code. A granted topic is accepted (issue 22 item 2).
func TestPubRefusedByACL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	acl := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(acl, []byte("topic readwrite open/#\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := brokertest.Start(t, broker.Options{Auth: broker.AuthOptions{ACLFile: acl}})
	url := brokertest.Endpoint(t, srv, "mqtt")
	for _, c := range []struct {
		name  string
		args  []string
		code  int
		wants []string
	}{
		{"3.1.1 refused", []string{"-t", "closed/x", "-q", "1"}, exitFailure,
			[]string{"1 not accepted", "broker closed the connection before acknowledging this QoS 1 message", "probably refused by the broker's ACL", "--protocol 5"}},
		{"3.1.1 QoS 2 refused", []string{"-t", "closed/x", "-q", "2"}, exitFailure,
			[]string{"QoS 2 message", "probably refused by the broker's ACL"}},
		{"5 refused", []string{"-t", "closed/x", "-q", "1", "--protocol", "5"}, exitFailure,
			[]string{"broker refused", "reason 0x87; check the ACL"}},
		{"3.1.1 granted", []string{"-t", "open/x", "-q", "1"}, exitOK, nil},
	} {
		code, _, stderr := runCLI(ctx, append([]string{"pub", "--url", url, "-m", "hi", "--timeout", "10s"}, c.args...)...)
		if code != c.code {
			t.Errorf("%s: exit %d, want %d: %s", c.name, code, c.code, stderr)
		}
		for _, w := range c.wants {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr %q lacks %q", c.name, stderr, w)
			}
		}
		if c.code == exitOK && strings.Contains(stderr, "ACL") {
			t.Errorf("%s: stderr %q", c.name, stderr)
		}
	}
}

// TestPubPastMaxPacketSize: a message larger than the broker accepts. MQTT
// 5 brokers that state a Maximum Packet Size in CONNACK (Mosquitto with
// max_packet_size) get it refused before sending, with the limit named;
// under 3.1.1 the iotq broker closes the connection and pub names the
// packet size beside the ACL as the likely cause (issue 22 item 2).
func TestPubPastMaxPacketSize(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m := testutil.StartMosquitto(t, "max_packet_size 1000")
	code, _, stderr := runCLI(ctx, "pub", "--url", m.URL(), "--protocol", "5", "-t", "big", "-q", "1", "--size", "2000", "--timeout", "10s")
	if code != exitFailure || !strings.Contains(stderr, "past the broker's maximum packet size of 1000 bytes (its CONNACK)") {
		t.Errorf("MQTT 5, Mosquitto max_packet_size 1000: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := runCLI(ctx, "pub", "--url", m.URL(), "--protocol", "5", "-t", "big", "-q", "1", "--size", "900", "--timeout", "10s"); code != exitOK {
		t.Errorf("MQTT 5, 900 bytes under the limit: exit %d, stderr %q", code, stderr)
	}

	srv := brokertest.Start(t, broker.Options{Flow: broker.FlowOptions{MaxPacketSize: 1000}})
	code, _, stderr = runCLI(ctx, "pub", "--url", brokertest.Endpoint(t, srv, "mqtt"), "-t", "big", "-q", "1", "--size", "2000", "--timeout", "10s")
	if code != exitFailure || !strings.Contains(stderr, "(payload 2000 bytes)") || !strings.Contains(stderr, "or is past its maximum packet size") {
		t.Errorf("MQTT 3.1.1, iotq broker max_packet_size 1000: exit %d, stderr %q", code, stderr)
	}
}
