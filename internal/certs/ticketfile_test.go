package certs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadTicketKeysFile: keys in file order (the first encrypts),
// comments and blank lines skipped; a bad line, an empty file and a file
// others may read are refused with what to do.
func TestLoadTicketKeysFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	k1, k2 := strings.Repeat("ab", 32), strings.Repeat("0F", 32)
	keys, err := LoadTicketKeysFile(write("ok", "# new key first\n"+k1+"\n\n  "+k2+"  \n", 0o600))
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0][0] != 0xab || keys[1][31] != 0x0f {
		t.Fatalf("keys %x", keys)
	}
	for _, c := range []struct{ name, text, want string }{
		{"short", k1 + "\n" + k1[:60] + "\n", "short:2: want 64 hex digits"},
		{"nothex", strings.Repeat("zz", 32), "nothex:1: want 64 hex digits"},
		{"empty", "# only a comment\n", "holds no key"},
	} {
		_, err := LoadTicketKeysFile(write(c.name, c.text, 0o600))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := LoadTicketKeysFile(write("open", k1, 0o644)); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("mode 0644: error %v, want a chmod hint", err)
	}
	if _, err := LoadTicketKeysFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file: no error")
	}
}
