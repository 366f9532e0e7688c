package kvlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func open(t *testing.T, path string) *Log {
	t.Helper()
	l, dropped, err := Open(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if dropped != 0 {
		t.Fatalf("Open dropped %d bytes of a log closed cleanly", dropped)
	}
	return l
}

// contents returns the live records as "key=value" in Each's order.
func contents(t *testing.T, l *Log) []string {
	t.Helper()
	var got []string
	if err := l.Each(func(k string, v []byte) error {
		got = append(got, k+"="+string(v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func same(a, b []string) bool { return strings.Join(a, "|") == strings.Join(b, "|") }

func TestRecordsSurviveReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	l := open(t, path)
	must(t, l.Write([]Op{{"a", []byte("1")}, {"b", []byte("2")}, {"c", []byte("3")}}))
	must(t, l.Write([]Op{{"b", nil}, {"a", []byte("1'")}, {"d", []byte{}}}))
	want := []string{"c=3", "a=1'", "d="}
	if got := contents(t, l); !same(got, want) {
		t.Fatalf("before reopen: %v, want %v", got, want)
	}
	must(t, l.Close())
	l = open(t, path)
	defer l.Close()
	if got := contents(t, l); !same(got, want) {
		t.Fatalf("after reopen: %v, want %v", got, want)
	}
	if l.Len() != 3 {
		t.Fatalf("Len %d, want 3", l.Len())
	}
}

// A put and the delete after it in one batch write nothing, and a delete
// of a key never stored writes nothing.
func TestCancelledOpsWriteNothing(t *testing.T) {
	l := open(t, filepath.Join(t.TempDir(), "x.log"))
	defer l.Close()
	size := l.Size()
	must(t, l.Write([]Op{{"a", []byte("1")}, {"zz", nil}, {"a", nil}}))
	if l.Size() != size || l.Len() != 0 {
		t.Fatalf("size %d -> %d, Len %d: a cancelled put or a delete of nothing was written", size, l.Size(), l.Len())
	}
}

// A crash during a write leaves the last batch cut short: Open removes all
// of it and keeps everything before, and the log goes on from there.
func TestTornTailIsCutOff(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	l := open(t, path)
	must(t, l.Write([]Op{{"a", []byte("1")}}))
	must(t, l.Write([]Op{{"b", []byte("22")}, {"c", []byte("333")}}))
	whole := l.Size()
	must(t, l.Close())
	for cut := int64(1); cut < 20; cut++ {
		t.Run(fmt.Sprint("cut ", cut), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "x.log")
			b, err := os.ReadFile(path)
			must(t, err)
			must(t, os.WriteFile(p, b[:whole-cut], 0o600))
			l, dropped, err := Open(p, false)
			must(t, err)
			defer l.Close()
			if dropped == 0 {
				t.Fatal("nothing dropped from a file cut short")
			}
			if got := contents(t, l); !same(got, []string{"a=1"}) {
				t.Fatalf("records after a torn batch: %v, want the first batch only (a batch is whole or not at all)", got)
			}
			must(t, l.Write([]Op{{"e", []byte("5")}}))
			must(t, l.Close())
			l2 := open(t, p)
			defer l2.Close()
			if got2 := contents(t, l2); got2[len(got2)-1] != "e=5" {
				t.Fatalf("after the cut and a write: %v", got2)
			}
		})
	}
}

func TestCorruptRecordEndsTheLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	l := open(t, path)
	must(t, l.Write([]Op{{"a", []byte("1")}}))
	must(t, l.Write([]Op{{"b", []byte("2")}}))
	must(t, l.Close())
	b, err := os.ReadFile(path)
	must(t, err)
	b[len(b)-1] ^= 0xff // b's value
	must(t, os.WriteFile(path, b, 0o600))
	l, dropped, err := Open(path, false)
	must(t, err)
	defer l.Close()
	if got := contents(t, l); dropped == 0 || !same(got, []string{"a=1"}) {
		t.Fatalf("dropped %d, records %v; want b's record dropped", dropped, got)
	}
}

func TestNotALogIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	must(t, os.WriteFile(path, []byte("something else entirely"), 0o600))
	_, _, err := Open(path, false)
	if err == nil || !strings.Contains(err.Error(), "move it away") {
		t.Fatalf("Open of a foreign file: %v", err)
	}
}

func TestSecondOpenIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	l := open(t, path)
	defer l.Close()
	if _, _, err := Open(path, false); err == nil {
		t.Fatal("a second Open of a log in use succeeded")
	}
}

// A log mostly of dead records is rewritten with the live ones only, and
// reads back the same, also after a reopen.
func TestCompaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	l := open(t, path)
	l.compactAt = 4 << 10
	val := bytes.Repeat([]byte("v"), 100)
	for i := range 200 {
		must(t, l.Write([]Op{{fmt.Sprint("k", i), val}}))
		if i >= 3 {
			must(t, l.Write([]Op{{fmt.Sprint("k", i-3), nil}}))
		}
	}
	if l.Size() > 8<<10 {
		t.Fatalf("size %d after 200 puts of which 3 live: not compacted", l.Size())
	}
	want := []string{"k197=" + string(val), "k198=" + string(val), "k199=" + string(val)}
	if got := contents(t, l); !same(got, want) {
		t.Fatalf("after compaction: %d records", len(got))
	}
	must(t, l.Write([]Op{{"k198", nil}}))
	must(t, l.Close())
	if _, err := os.Stat(path + compactSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the compaction's file is left: %v", err)
	}
	l = open(t, path)
	defer l.Close()
	if got := contents(t, l); !same(got, []string{want[0], want[2]}) {
		t.Fatalf("after reopen: %d records", len(got))
	}
}

// A compaction's file that a crash left behind is removed at Open, and
// the log reads as it was.
func TestUnfinishedCompactionIsRemoved(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	l := open(t, path)
	must(t, l.Write([]Op{{"a", []byte("1")}}))
	must(t, l.Close())
	must(t, os.WriteFile(path+compactSuffix, []byte("half a compaction"), 0o600))
	l = open(t, path)
	defer l.Close()
	if _, err := os.Stat(path + compactSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the unfinished compaction is still there: %v", err)
	}
	if got := contents(t, l); !same(got, []string{"a=1"}) {
		t.Fatalf("records %v", got)
	}
}

func TestOversizedRecordIsRefused(t *testing.T) {
	l := open(t, filepath.Join(t.TempDir(), "x.log"))
	defer l.Close()
	if err := l.Write([]Op{{strings.Repeat("k", MaxKey+1), []byte("v")}}); err == nil {
		t.Fatal("a key over MaxKey was written")
	}
	if err := l.Write([]Op{{"", []byte("v")}, {"ok", []byte("v")}}); err == nil {
		t.Fatal("an empty key was written")
	}
	if got := contents(t, l); !same(got, []string{"ok=v"}) {
		t.Fatalf("records %v: the good record of a batch with a bad one was not written", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Live records read back whole across dead ones and across the reader's
// buffer: values larger than it, gaps of deleted records between them.
func TestLargeValuesAndGapsReadBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.log")
	l := open(t, path)
	big := bytes.Repeat([]byte("0123456789"), 40<<10) // 400 KiB
	for i := range 6 {
		must(t, l.Write([]Op{{fmt.Sprint("k", i), append([]byte(fmt.Sprint(i)), big...)}}))
	}
	must(t, l.Write([]Op{{"k1", nil}, {"k4", nil}}))
	must(t, l.Close())
	l = open(t, path)
	defer l.Close()
	var keys []string
	must(t, l.Each(func(k string, v []byte) error {
		if len(v) != len(big)+1 || !bytes.Equal(v[1:], big) || string(v[:1]) != k[1:] {
			t.Fatalf("%s read back as %d bytes starting %q", k, len(v), v[:min(len(v), 8)])
		}
		keys = append(keys, k)
		return nil
	}))
	if !same(keys, []string{"k0", "k2", "k3", "k5"}) {
		t.Fatalf("keys %v", keys)
	}
}
