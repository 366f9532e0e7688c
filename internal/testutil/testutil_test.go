package testutil

import (
	"errors"
	"net"
	"testing"
	"time"
)

func TestEventually(t *testing.T) {
	n := 0
	Eventually(t, time.Second, func() error {
		n++
		if n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if n != 3 {
		t.Fatalf("fn called %d times", n)
	}
}

// TestStartMosquitto: the broker accepts on its port and Kill stops it.
func TestStartMosquitto(t *testing.T) {
	m := StartMosquitto(t, "")
	c, err := net.Dial("tcp", m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	m.Kill()
	m.Kill() // idempotent
	if c, err := net.DialTimeout("tcp", m.Addr(), time.Second); err == nil {
		c.Close()
		t.Fatal("mosquitto still accepts after Kill")
	}
}
