package testutil

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// mqttConnect sends a bare MQTT 3.1.1 CONNECT (clean session) to addr and
// returns the CONNACK's return code.
func mqttConnect(addr, id string) (byte, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(Scale(20 * time.Second)))
	vh := []byte{0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 60, 0, byte(len(id))}
	pkt := append([]byte{0x10, byte(len(vh) + len(id))}, append(vh, id...)...)
	if _, err := c.Write(pkt); err != nil {
		return 0, err
	}
	ack := make([]byte, 4)
	if _, err := io.ReadFull(c, ack); err != nil {
		return 0, fmt.Errorf("read CONNACK: %w", err)
	}
	if !bytes.Equal(ack[:2], []byte{0x20, 0x02}) {
		return 0, fmt.Errorf("not a CONNACK: % x", ack)
	}
	return ack[3], nil
}

// TestNATSCluster: three nodes come up with JetStream and MQTT, each accepts
// an MQTT session; after one node is killed the other two elect (or keep) a
// meta leader and still accept MQTT sessions.
func TestNATSCluster(t *testing.T) {
	c := StartNATSCluster(t, 3)
	if len(c.MQTTUpstreams()) != 3 {
		t.Fatalf("upstreams %v", c.MQTTUpstreams())
	}
	for _, n := range c.Nodes {
		if rc, err := mqttConnect(n.MQTTAddr(), "probe-"+n.Name); err != nil || rc != 0 {
			t.Fatalf("MQTT CONNECT to %s: rc %d, %v\n%s", n.Name, rc, err, tail(n.Log(), 20))
		}
	}
	leader := c.MetaLeader()
	if leader == "" {
		t.Fatal("no meta leader after WaitReady")
	}
	var victim *NATSNode
	for _, n := range c.Nodes {
		if n.Name == leader {
			victim = n // the hardest case: the meta leader dies
		}
	}
	victim.Kill()
	if err := syscall.Kill(victim.PID, 0); err == nil {
		t.Fatalf("process %d still exists after Kill", victim.PID)
	}
	c.WaitReady(t, 60*time.Second)
	if l := c.MetaLeader(); l == "" || l == victim.Name {
		t.Fatalf("meta leader after killing %s: %q", victim.Name, l)
	}
	for _, n := range c.Nodes {
		if n == victim {
			continue
		}
		if rc, err := mqttConnect(n.MQTTAddr(), "after-"+n.Name); err != nil || rc != 0 {
			t.Fatalf("MQTT CONNECT to %s after the kill: rc %d, %v", n.Name, rc, err)
		}
	}
}
