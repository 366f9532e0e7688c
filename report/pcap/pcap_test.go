package pcap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
)

func TestReadBackKnownPacketList(t *testing.T) {
	a := netip.MustParseAddr("10.7.0.2")
	b := netip.MustParseAddr("10.7.0.1")
	want := []Packet{
		{TimeNs: 1_700_000_000_000_000_000, Len: 60, Src: a, Dst: b, Proto: 17, SrcPort: 40000, DstPort: 14567},
		{TimeNs: 1_700_000_000_025_000_123, Len: 60, Src: b, Dst: a, Proto: 17, SrcPort: 14567, DstPort: 40000},
		{TimeNs: 1_700_000_001_000_000_999, Len: 1350, Src: a, Dst: b, Proto: 17, SrcPort: 40000, DstPort: 14567},
		{TimeNs: 1_700_000_002_500_000_000, Len: 28, Src: b, Dst: a, Proto: 17, SrcPort: 14567, DstPort: 40000},
	}
	path := filepath.Join(t.TempDir(), "pub.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range want {
		if err := w.WritePacket(p.TimeNs, IPv4Packet(p.Src, p.Dst, 17, p.SrcPort, p.DstPort, p.Len)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("read %d packets, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("packet %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestBigEndianMicrosecondFile(t *testing.T) {
	var buf bytes.Buffer
	h := make([]byte, 24)
	binary.BigEndian.PutUint32(h[0:], magicMicro)
	binary.BigEndian.PutUint32(h[20:], LinkTypeIPv4)
	buf.Write(h)
	rec := make([]byte, 16)
	binary.BigEndian.PutUint32(rec[0:], 10)
	binary.BigEndian.PutUint32(rec[4:], 250) // microseconds
	binary.BigEndian.PutUint32(rec[8:], 28)
	binary.BigEndian.PutUint32(rec[12:], 1500) // truncated capture
	buf.Write(rec)
	buf.Write(IPv4Packet(netip.MustParseAddr("1.2.3.4"), netip.MustParseAddr("5.6.7.8"), 6, 51000, 8883, 28))
	rd, err := NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	p, err := rd.Next()
	if err != nil {
		t.Fatal(err)
	}
	if p.TimeNs != 10_000_250_000 || p.Len != 1500 || p.Src.String() != "1.2.3.4" || p.Dst.String() != "5.6.7.8" ||
		p.Proto != 6 || p.SrcPort != 51000 || p.DstPort != 8883 {
		t.Errorf("packet = %+v", p)
	}
	if _, err := rd.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("second Next = %v, want io.EOF", err)
	}
}

func TestBadInput(t *testing.T) {
	if _, err := NewReader(bytes.NewReader([]byte("hello, this is not a pcap file"))); !errors.Is(err, ErrNotPcap) {
		t.Errorf("text file: err = %v, want ErrNotPcap", err)
	}
	if _, err := NewReader(bytes.NewReader(nil)); !errors.Is(err, ErrNotPcap) {
		t.Errorf("empty file: err = %v, want ErrNotPcap", err)
	}
	var buf bytes.Buffer
	w, _ := NewWriter(&buf)
	_ = w.WritePacket(1, IPv4Packet(netip.MustParseAddr("1.1.1.1"), netip.MustParseAddr("2.2.2.2"), 17, 1, 2, 100))
	cut := buf.Bytes()[:buf.Len()-10]
	rd, err := NewReader(bytes.NewReader(cut))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rd.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated record: err = %v, want io.ErrUnexpectedEOF", err)
	}
}

func FuzzReader(f *testing.F) {
	var buf bytes.Buffer
	w, _ := NewWriter(&buf)
	_ = w.WritePacket(5, IPv4Packet(netip.MustParseAddr("1.1.1.1"), netip.MustParseAddr("2.2.2.2"), 17, 1, 2, 40))
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		rd, err := NewReader(bytes.NewReader(b))
		if err != nil {
			return
		}
		for i := 0; i < 1000; i++ {
			if _, err := rd.Next(); err != nil {
				return
			}
		}
	})
}
