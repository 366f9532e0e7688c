package kvlog

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpen: whatever follows the magic, Open neither panics nor fails, and
// the log it returns takes a write that a reopen reads back.
func FuzzOpen(f *testing.F) {
	seed := filepath.Join(f.TempDir(), "seed.log")
	l, _, err := Open(seed, false)
	if err != nil {
		f.Fatal(err)
	}
	if err := l.Write([]Op{{"client:1", []byte("payload")}, {"client:2", []byte("x")}}); err != nil {
		f.Fatal(err)
	}
	if err := l.Write([]Op{{"client:1", nil}}); err != nil {
		f.Fatal(err)
	}
	_ = l.Close()
	b, err := os.ReadFile(seed)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b[len(magic):])
	f.Add([]byte{})
	f.Add([]byte{255, 255, 255, 255, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, rest []byte) {
		path := filepath.Join(t.TempDir(), "x.log")
		if err := os.WriteFile(path, append([]byte(magic), rest...), 0o600); err != nil {
			t.Fatal(err)
		}
		l, _, err := Open(path, false)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		n := 0
		if err := l.Each(func(string, []byte) error { n++; return nil }); err != nil {
			t.Fatalf("Each: %v", err)
		}
		if err := l.Write([]Op{{"after", []byte("fuzz")}}); err != nil {
			t.Fatalf("Write: %v", err)
		}
		_ = l.Close()
		l, dropped, err := Open(path, false)
		if err != nil || dropped != 0 {
			t.Fatalf("reopen: dropped %d, %v", dropped, err)
		}
		defer l.Close()
		found := false
		_ = l.Each(func(k string, v []byte) error {
			found = found || k == "after" && string(v) == "fuzz"
			return nil
		})
		if !found || l.Len() != n+1 && l.Len() != n {
			t.Fatalf("after reopen: found %v, %d records (had %d)", found, l.Len(), n)
		}
	})
}
