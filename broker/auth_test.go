package broker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func TestParseACL(t *testing.T) {
	acl, err := ParseACL("acl", strings.NewReader(`# anonymous
topic read public/#
user alice
topic readwrite home/alice/#   # her house
topic write cmd/+
topic read #
user *
topic read status/%u
topic deny status/alice
user carol
topic readwrite #
topic deny secret/#
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		user  string
		anon  bool
		topic string
		write bool
		want  bool
	}{
		{"", true, "public/x", false, true},
		{"", true, "public/x", true, false},
		{"", true, "home/alice/x", false, false},
		{"alice", false, "home/alice/door", true, true},
		{"alice", false, "home/bob/door", true, false},
		{"alice", false, "home/bob/door", false, true},
		{"alice", false, "cmd/x", true, true},
		{"alice", false, "cmd/x", false, true},
		{"alice", false, "cmd/x", true, true},
		{"bob", false, "status/bob", false, true},
		{"bob", false, "status/alice", false, false},
		{"bob", false, "public/x", false, false},
		{"alice", false, "status/alice", false, false}, // deny in "user *" wins over alice's "read #"
		{"carol", false, "a/b", true, true},
		{"carol", false, "secret/x", false, false},
		{"carol", false, "secret/x", true, false},
		{"carol", false, "secret/#", false, false}, // a subscription filter
	} {
		if got := acl.Allowed(c.user, c.anon, c.topic, c.write); got != c.want {
			t.Errorf("Allowed(%q, anon=%v, %q, write=%v) = %v, want %v", c.user, c.anon, c.topic, c.write, got, c.want)
		}
	}
}

func TestParseACLReportsAllErrors(t *testing.T) {
	_, err := ParseACL("acl.txt", strings.NewReader("topic sometimes a/b\nuser\ntopic read a/#/b\nallow x\n"))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"acl.txt:1: access \"sometimes\"", "acl.txt:2: want \"user NAME\"", "acl.txt:3: topic pattern", "acl.txt:4: unknown keyword \"allow\""} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

func TestPasswordFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "passwd")
	if err := SetPassword(file, "alice", []byte("s3cret")); err != nil {
		t.Fatal(err)
	}
	if err := SetPassword(file, "bob", []byte("hunter2")); err != nil {
		t.Fatal(err)
	}
	if err := SetPassword(file, "alice", []byte("changed")); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(file)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("stat %v mode %v, want 0600", err, st.Mode())
	}
	b, _ := os.ReadFile(file)
	if n := strings.Count(string(b), "\n"); n != 2 {
		t.Fatalf("want 2 lines, got %d:\n%s", n, b)
	}
	a, err := loadAuth(AuthOptions{PasswordFile: file, AllowAnonymous: boolPtr(false)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		user, pass string
		has        bool
		want       bool
	}{
		{"alice", "changed", true, true},
		{"alice", "s3cret", true, false},
		{"bob", "hunter2", true, true},
		{"carol", "x", true, false},
		{"", "", false, false},
	} {
		if got := a.Authenticate([]byte(c.user), []byte(c.pass), c.has); got != c.want {
			t.Errorf("authenticate(%q, %q) = %v, want %v", c.user, c.pass, got, c.want)
		}
	}
	if err := SetPassword(file, "a:b", []byte("x")); err == nil {
		t.Error("user with ':' accepted")
	}
}

func TestParsePasswordsErrors(t *testing.T) {
	h, _ := bcrypt.GenerateFromPassword([]byte("x"), bcrypt.MinCost)
	_, err := ParsePasswords("pw", strings.NewReader("# c\nalice:"+string(h)+"\nbob:plain\nnocolon\nalice:"+string(h)+"\n"))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"pw:3: user \"bob\": the hash is not bcrypt", "pw:4: want \"user:BCRYPT_HASH\"", "pw:5: user \"alice\" is listed twice"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

func FuzzParseACL(f *testing.F) {
	f.Add("topic read a/#\nuser bob\ntopic write b/+\n")
	f.Add("user *\ntopic %u/#\n")
	f.Fuzz(func(t *testing.T, s string) {
		acl, err := ParseACL("fuzz", strings.NewReader(s))
		if err != nil {
			return
		}
		_ = acl.Allowed("u", false, "a/b", true)
		_ = acl.Allowed("", true, "a/b", false)
	})
}

func FuzzParsePasswords(f *testing.F) {
	f.Add("alice:$2a$10$abcdefghijklmnopqrstuv\n")
	f.Add("x")
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = ParsePasswords("fuzz", strings.NewReader(s))
	})
}
