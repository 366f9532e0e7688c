package broker

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/iotq/iotq/internal/atomicfile"
	"github.com/iotq/iotq/internal/mqttname"
	"golang.org/x/crypto/bcrypt"
)

// Access is what an ACL rule grants.
type Access uint8

// Access levels of ACL rules.
const (
	AccessRead      Access = 1 << iota // receive messages (subscribe)
	AccessWrite                        // publish
	AccessReadWrite        = AccessRead | AccessWrite
	// AccessDeny refuses reading and writing topics that a broader rule
	// grants; deny rules are checked before any grant, as in Mosquitto.
	AccessDeny Access = 1 << 2
)

// ACLRule grants Access to topics matching Pattern (an MQTT topic filter; %u
// is replaced by the client's username).
type ACLRule struct {
	Access  Access
	Pattern string
}

// ACL holds the rules of an ACL file. Anonymous applies to clients without a
// username, All to every client with one, Users to one user each.
type ACL struct {
	Anonymous []ACLRule
	All       []ACLRule
	Users     map[string][]ACLRule
}

// ParseACL reads an ACL file:
//
//	# comment
//	topic read public/#          # rules before any "user" line: anonymous clients
//	user alice                   # rules below apply to user alice
//	topic readwrite home/alice/#
//	topic write cmd/+
//	user *                       # rules below apply to every user with a name
//	topic read status/%u         # %u is the username
//	topic deny status/admin      # denied even though a rule above grants it
//
// Access is read, write, readwrite or deny; "topic PATTERN" alone means
// readwrite. Deny rules (of the client's sections: anonymous, or the user's
// own and "user *") are checked first and win over every grant.
// name labels errors (the file name). All problems are reported at once.
func ParseACL(name string, r io.Reader) (*ACL, error) {
	acl := &ACL{Users: map[string][]ACLRule{}}
	section := "" // "" anonymous, "*" all, else user
	var errs []error
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(stripComment(sc.Text()))
		if text == "" {
			continue
		}
		f := strings.Fields(text)
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s:%d: %s", name, line, fmt.Sprintf(format, args...)))
		}
		switch f[0] {
		case "user":
			if len(f) != 2 {
				bad("want \"user NAME\" (or \"user *\" for every named user), got %q", text)
				continue
			}
			section = f[1]
			if section != "*" {
				if _, ok := acl.Users[section]; !ok {
					acl.Users[section] = nil
				}
			}
		case "topic":
			var rule ACLRule
			switch len(f) {
			case 2:
				rule = ACLRule{Access: AccessReadWrite, Pattern: f[1]}
			case 3:
				a, ok := map[string]Access{"read": AccessRead, "write": AccessWrite, "readwrite": AccessReadWrite, "deny": AccessDeny}[f[1]]
				if !ok {
					bad("access %q: want read, write, readwrite or deny", f[1])
					continue
				}
				rule = ACLRule{Access: a, Pattern: f[2]}
			default:
				bad("want \"topic [read|write|readwrite|deny] PATTERN\", got %q", text)
				continue
			}
			if err := validFilter(rule.Pattern); err != nil {
				bad("topic pattern %q: %v", rule.Pattern, err)
				continue
			}
			switch section {
			case "":
				acl.Anonymous = append(acl.Anonymous, rule)
			case "*":
				acl.All = append(acl.All, rule)
			default:
				acl.Users[section] = append(acl.Users[section], rule)
			}
		default:
			bad("unknown keyword %q: want \"user NAME\" or \"topic [read|write|readwrite|deny] PATTERN\"", f[0])
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%s: read: %w", name, err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return acl, nil
}

// stripComment removes a comment: a line starting with '#', or " # text"
// after the rule. A '#' that is a topic wildcard ("topic read #",
// "a/#") stays.
func stripComment(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "#") {
		return ""
	}
	for i := 1; i+1 < len(s); i++ {
		if s[i] == '#' && isSpace(s[i-1]) && isSpace(s[i+1]) {
			return s[:i]
		}
	}
	return s
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' }

// validFilter checks an MQTT topic filter (internal/mqttname holds the rules).
func validFilter(f string) error { return mqttname.CheckFilter(f) }

// allows reports whether a rule of rules with an access in want matches
// topic for user.
func allows(rules []ACLRule, user, topic string, want Access) bool {
	for _, r := range rules {
		if r.Access&want == 0 {
			continue
		}
		p := r.Pattern
		if strings.Contains(p, "%u") {
			if user == "" || strings.ContainsAny(user, "/+#") {
				continue
			}
			p = strings.ReplaceAll(p, "%u", user)
		}
		if mqttname.Match(p, topic) {
			return true
		}
	}
	return false
}

// Allowed reports whether the ACL lets user (anonymous: no username) read or
// write topic.
func (a *ACL) Allowed(user string, anonymous bool, topic string, write bool) bool {
	want := AccessRead
	if write {
		want = AccessWrite
	}
	if anonymous {
		return !allows(a.Anonymous, "", topic, AccessDeny) && allows(a.Anonymous, "", topic, want)
	}
	if allows(a.Users[user], user, topic, AccessDeny) || allows(a.All, user, topic, AccessDeny) {
		return false
	}
	return allows(a.Users[user], user, topic, want) || allows(a.All, user, topic, want)
}

// ParsePasswords reads a password file: lines "user:BCRYPT_HASH", '#'
// comments and blank lines ignored. All problems are reported at once.
func ParsePasswords(name string, r io.Reader) (map[string][]byte, error) {
	out := map[string][]byte{}
	var errs []error
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		user, hash, ok := strings.Cut(text, ":")
		switch {
		case !ok || user == "":
			errs = append(errs, fmt.Errorf("%s:%d: want \"user:BCRYPT_HASH\" (create entries with 'iotq broker passwd %s USER')", name, line, name))
		case func() bool { _, err := bcrypt.Cost([]byte(hash)); return err != nil }():
			errs = append(errs, fmt.Errorf("%s:%d: user %q: the hash is not bcrypt ($2a$/$2b$/$2y$...); create it with 'iotq broker passwd %s %s'", name, line, user, name, user))
		case out[user] != nil:
			errs = append(errs, fmt.Errorf("%s:%d: user %q is listed twice", name, line, user))
		default:
			out[user] = []byte(hash)
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%s: read: %w", name, err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// SetPassword adds user to the password file (or replaces the user's entry)
// with a bcrypt hash of password, creating the file (mode 0600) if needed.
// The file is replaced atomically.
func SetPassword(file, user string, password []byte) error {
	if user == "" || strings.ContainsAny(user, ":\n\r") || strings.TrimSpace(user) != user {
		return fmt.Errorf("user name %q: must be non-empty without ':', newlines or surrounding spaces", user)
	}
	if len(password) == 0 {
		return errors.New("empty password: give a password on standard input")
	}
	if len(password) > 72 {
		return errors.New("password longer than 72 bytes: bcrypt cannot use it")
	}
	hash, err := bcrypt.GenerateFromPassword(password, bcrypt.DefaultCost)
	if err != nil {
		return fmt.Errorf("hash password: %w", err)
	}
	old, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", file, err)
	}
	var lines []string
	replaced := false
	for _, l := range strings.Split(string(old), "\n") {
		if l == "" {
			continue
		}
		if u, _, ok := strings.Cut(strings.TrimSpace(l), ":"); ok && u == user {
			if replaced {
				continue
			}
			l = user + ":" + string(hash)
			replaced = true
		}
		lines = append(lines, l)
	}
	if !replaced {
		lines = append(lines, user+":"+string(hash))
	}
	data := []byte(strings.Join(lines, "\n") + "\n")
	return atomicfile.WriteFile(file, data, 0o600)
}

// fileAuth implements authorizer from a password file and an ACL file.
type fileAuth struct {
	passwords      map[string][]byte // nil: no password file
	acl            *ACL              // nil: no ACL file
	allowAnonymous bool
}

func loadAuth(o AuthOptions) (*fileAuth, error) {
	a := &fileAuth{allowAnonymous: o.AllowAnonymous == nil || *o.AllowAnonymous}
	var errs []error
	if o.PasswordFile != "" {
		b, err := os.ReadFile(o.PasswordFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("password file: %w", err))
		} else if a.passwords, err = ParsePasswords(o.PasswordFile, bytes.NewReader(b)); err != nil {
			errs = append(errs, err)
		}
	}
	if o.ACLFile != "" {
		b, err := os.ReadFile(o.ACLFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("ACL file: %w", err))
		} else if a.acl, err = ParseACL(o.ACLFile, bytes.NewReader(b)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("broker: auth:\n%w", err)
	}
	return a, nil
}

func (a *fileAuth) Authenticate(username, password []byte, hasUser bool) bool {
	if !hasUser || len(username) == 0 {
		return a.allowAnonymous
	}
	if a.passwords == nil {
		return true
	}
	hash, ok := a.passwords[string(username)]
	if !ok {
		// Spend the same time as for a known user.
		_ = bcrypt.CompareHashAndPassword(dummyHash, password)
		return false
	}
	return bcrypt.CompareHashAndPassword(hash, password) == nil
}

func (a *fileAuth) Authorize(user string, anonymous bool, topic string, write bool) bool {
	if a.acl == nil {
		return true
	}
	return a.acl.Allowed(user, anonymous, topic, write)
}

// dummyHash is a bcrypt hash of a random string at the default cost, used to
// keep unknown users as slow as known ones.
var dummyHash = []byte("$2a$10$7EqJtq98hPqEX7fNZaFWoOhi5BWX4Z3Y3o5xqY5GkB/Y7a6wqv1tW")
