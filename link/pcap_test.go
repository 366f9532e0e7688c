package link

import (
	"bytes"
	"encoding/binary"
	"sync"
	"testing"
	"time"
)

// blockingWriter holds every Write until release is closed, like a disk
// that stalls.
type blockingWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	release chan struct{}
	writes  int
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	b.mu.Lock()
	b.writes++
	first := b.writes == 1
	b.mu.Unlock()
	if !first { // the header goes through; later writes stall
		<-b.release
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// TestPcapWriteNeverBlocksOnTheFile: WritePacket returns while the file
// write is stuck (the forwarding thread must never wait on the disk), and
// every packet is in the file after Close.
func TestPcapWriteNeverBlocksOnTheFile(t *testing.T) {
	bw := &blockingWriter{release: make(chan struct{})}
	w, err := NewPcapWriter(bw, 0)
	if err != nil {
		t.Fatal(err)
	}
	pkt := make([]byte, 1400)
	const n = 2000 // 2.8 MB: many flush thresholds, all while the writer is stuck
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			binary.BigEndian.PutUint32(pkt, uint32(i))
			if err := w.WritePacket(time.Unix(0, int64(i)), pkt); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("WritePacket blocked while the file write was stuck")
	}
	close(bw.release)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Dropped() != 0 || w.Packets() != n {
		t.Fatalf("packets %d dropped %d, want %d and 0", w.Packets(), w.Dropped(), n)
	}
	got := bw.buf.Bytes()
	if want := 24 + n*(16+len(pkt)); len(got) != want {
		t.Fatalf("file has %d bytes, want %d", len(got), want)
	}
	// Records are in order.
	for i := range n {
		off := 24 + i*(16+len(pkt)) + 16
		if seq := binary.BigEndian.Uint32(got[off:]); seq != uint32(i) {
			t.Fatalf("record %d holds packet %d", i, seq)
		}
	}
}

// TestPcapDropsBeyondTheBound: a stalled disk costs capture records
// (counted), never memory without bound.
func TestPcapDropsBeyondTheBound(t *testing.T) {
	bw := &blockingWriter{release: make(chan struct{})}
	w, err := NewPcapWriter(bw, 0)
	if err != nil {
		t.Fatal(err)
	}
	pkt := make([]byte, 60000)
	n := 3 * pcapMaxPending / len(pkt)
	for range n {
		if err := w.WritePacket(time.Now(), pkt); err != nil {
			t.Fatal(err)
		}
	}
	if w.Dropped() == 0 {
		t.Fatalf("no packet dropped after %d bytes with the file stuck", n*len(pkt))
	}
	close(bw.release)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := w.Packets()+w.Dropped(), n; got != want {
		t.Fatalf("packets+dropped = %d, want %d", got, want)
	}
	if err := w.WritePacket(time.Now(), pkt); err == nil {
		t.Fatal("WritePacket after Close succeeded")
	}
}
