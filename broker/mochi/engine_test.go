package mochi

import (
	"log/slog"
	"testing"

	"github.com/iotq/iotq/broker/engine"
)

type nopObserver struct{}

func (nopObserver) MessageIn(byte)       {}
func (nopObserver) MessageOut(byte, int) {}
func (nopObserver) Dropped(string, byte) {}
func (nopObserver) Stalled()             {}
func (nopObserver) Refused(string)       {}
func (nopObserver) SessionOpened(string) {}
func (nopObserver) SessionClosed(string) {}

var _ engine.Observer = nopObserver{}

// TestMessagesWithoutExpiryDoNotExpire: the engine gives messages no
// expiry of its own. With a maximum, mqttcore drops every queued and
// retained message that long after it was published (mochi's default was
// a day), expiry interval or not.
func TestMessagesWithoutExpiryDoNotExpire(t *testing.T) {
	e, err := New(engine.Config{Logger: slog.New(slog.DiscardHandler), Obs: nopObserver{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	if got := e.srv.Options.Capabilities.MaximumMessageExpiryInterval; got != 0 {
		t.Fatalf("maximum message expiry %d s: messages without an expiry interval would expire", got)
	}
}
