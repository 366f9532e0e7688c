package payload

import (
	"bytes"
	"errors"
	"testing"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, size := range []int{HeaderSize, 17, 100, 2048} {
		h := Header{Seq: 0xdeadbeef, SendNs: 1_790_000_000_123_456_789}
		b, err := Encode(h, size)
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if len(b) != size {
			t.Fatalf("size %d: got %d bytes", size, len(b))
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("size %d: decode: %v", size, err)
		}
		if got != h {
			t.Fatalf("size %d: got %+v want %+v", size, got, h)
		}
		if !bytes.Equal(b[HeaderSize:], make([]byte, size-HeaderSize)) {
			t.Fatalf("size %d: padding not zero", size)
		}
	}
}

func TestWireLayout(t *testing.T) {
	b, err := Encode(Header{Seq: 1, SendNs: 2}, HeaderSize)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{'I', 'Q', 1, 16, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2}
	if !bytes.Equal(b, want) {
		t.Fatalf("got % x want % x", b, want)
	}
}

func TestEncodeTooSmall(t *testing.T) {
	_, err := Encode(Header{}, HeaderSize-1)
	if !errors.Is(err, ErrTooSmall) {
		t.Fatalf("got %v, want ErrTooSmall", err)
	}
	if CheckSize(HeaderSize-1) == nil || CheckSize(HeaderSize) != nil {
		t.Fatal("CheckSize boundary wrong")
	}
}

func TestDecodeErrors(t *testing.T) {
	good, _ := Encode(Header{Seq: 7}, 32)
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrNotMeasurement},
		{"plain text", []byte("hello world, this is text"), ErrNotMeasurement},
		{"truncated header", good[:10], ErrMalformed},
		{"unknown version", append([]byte{'I', 'Q', 9}, good[3:]...), ErrMalformed},
		{"header length too small", append([]byte{'I', 'Q', 1, 4}, good[4:]...), ErrMalformed},
		{"header length beyond payload", append([]byte{'I', 'Q', 1, 200}, good[4:]...), ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Decode(c.b); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
	if !IsMeasurement(good) || IsMeasurement([]byte("IQ")) {
		t.Fatal("IsMeasurement wrong")
	}
}

func FuzzDecode(f *testing.F) {
	good, _ := Encode(Header{Seq: 42, SendNs: 99}, 40)
	f.Add(good)
	f.Add([]byte("IQ"))
	f.Add([]byte{})
	f.Add([]byte("plain"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Decode(b)
		if err != nil {
			return
		}
		// A valid header re-encodes to the same first 16 bytes.
		re, err := Encode(h, HeaderSize)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(re[:4], []byte{'I', 'Q', 1, 16}) || !bytes.Equal(re[4:], b[4:HeaderSize]) {
			t.Fatalf("re-encode mismatch: % x vs % x", re, b[:HeaderSize])
		}
	})
}

func TestRunID(t *testing.T) {
	id := NewRunID()
	if id == 0 || id == NewRunID() {
		t.Fatalf("NewRunID gave %d twice or zero", id)
	}
	for _, c := range []struct {
		size   int
		wantHL byte
		wantID uint64
	}{{16, HeaderSize, 0}, {23, HeaderSize, 0}, {24, RunHeaderSize, id}, {100, RunHeaderSize, id}} {
		b, err := Encode(Header{Seq: 7, SendNs: 42, RunID: id}, c.size)
		if err != nil {
			t.Fatal(err)
		}
		if b[3] != c.wantHL {
			t.Errorf("size %d: header length %d, want %d", c.size, b[3], c.wantHL)
		}
		h, err := Decode(b)
		if err != nil || h != (Header{Seq: 7, SendNs: 42, RunID: c.wantID}) {
			t.Errorf("size %d: Decode = %+v, %v", c.size, h, err)
		}
		// A decoder of the 16-byte layout (version 1, header length
		// checked only against the payload) still reads seq and time.
		if b[2] != 1 || int(b[3]) > len(b) {
			t.Errorf("size %d: not readable by a version 1 decoder", c.size)
		}
	}
}
