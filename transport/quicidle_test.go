package transport

import (
	"errors"
	"os"
	"testing"
	"time"
)

// TestQUICMuxNotifyReadable: a multi-stream conn calls the registered
// function once when a packet arrives on the control stream or on a data
// stream, at once when one is queued already, and when the connection
// ends; never after the registration was dropped.
func TestQUICMuxNotifyReadable(t *testing.T) {
	f := newMuxFixture(t, QUICStreamOptions{MaxDataStreams: 4})
	conn, ctl, sc := f.dial(t, nil)
	rn, ok := sc.(interface{ NotifyReadable(func()) bool })
	if !ok || !rn.NotifyReadable(nil) {
		t.Fatalf("%T cannot notify", sc)
	}
	woke := make(chan struct{}, 8)
	arm := func() { rn.NotifyReadable(func() { woke <- struct{}{} }) }
	expectWake := func(what string) {
		t.Helper()
		select {
		case <-woke:
		case <-time.After(10 * time.Second):
			t.Fatalf("no wake for %s", what)
		}
	}
	expectQuiet := func(what string) {
		t.Helper()
		select {
		case <-woke:
			t.Fatalf("woken %s", what)
		case <-time.After(200 * time.Millisecond):
		}
	}
	_ = sc.SetReadDeadline(time.Now().Add(10 * time.Second))

	arm()
	expectQuiet("with nothing to read")
	if _, err := ctl.Write(publishQoS1("a", 1, "on control")); err != nil {
		t.Fatal(err)
	}
	expectWake("a packet on the control stream")
	expectQuiet("twice for one registration")
	arm() // the packet is still queued: at once
	expectWake("a packet already queued")
	if pk := readMQTT(t, sc); pk[0]>>4 != 3 {
		t.Fatalf("packet 0x%02x, want PUBLISH", pk[0])
	}

	arm()
	us, err := conn.OpenUniStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := us.Write(publishQoS1("b", 2, "on a data stream")); err != nil {
		t.Fatal(err)
	}
	expectWake("a packet on a data stream")
	if pk := readMQTT(t, sc); pk[0]>>4 != 3 {
		t.Fatalf("packet 0x%02x, want PUBLISH", pk[0])
	}

	arm()
	rn.NotifyReadable(nil)
	if _, err := ctl.Write(publishQoS1("c", 3, "unwatched")); err != nil {
		t.Fatal(err)
	}
	expectQuiet("after the registration was dropped")
	if pk := readMQTT(t, sc); pk[0]>>4 != 3 {
		t.Fatalf("packet 0x%02x, want PUBLISH", pk[0])
	}

	arm()
	_ = conn.CloseWithError(0, "")
	expectWake("the connection's end")
	buf := make([]byte, 16)
	for {
		_, err := sc.Read(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("Read did not see the connection's end")
		}
		if err != nil {
			break
		}
	}
}

// TestCtlBuffer: the control stream reader waits on a small buffer, takes
// a full-size one after a read that filled it, keeps it while reads stay
// large and gives it back after a small read.
func TestCtlBuffer(t *testing.T) {
	cb := ctlBuffer{pool: newCtlBufferPool()}
	steps := []struct{ last, want int }{
		{0, ctlSmall},          // first read
		{100, ctlSmall},        // small reads keep the small buffer
		{ctlSmall, ctlBig},     // it came back full
		{ctlBig, ctlBig},       // bulk
		{ctlSmall + 1, ctlBig}, // still more than the small one holds
		{10, ctlSmall},         // light traffic again
	}
	for i, s := range steps {
		if got := len(cb.next(s.last)); got != s.want {
			t.Fatalf("step %d: after a read of %d bytes the buffer has %d bytes, want %d", i, s.last, got, s.want)
		}
	}
	cb.release()
	if cb.big != nil || cb.small != nil {
		t.Fatal("release kept a buffer")
	}
}
