package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/records"
)

// TestStatsJSONShape: --stats json of pub and sub names each connection
// fact once (no second copy under "connection"), at the top level where
// scripts read them, and only the facts the protocol has: CoAP has no
// client id and no session_present; MQTT has both. The lab's reader takes
// the object as printed (issue 22 item 3).
func TestStatsJSONShape(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv := brokertest.Start(t, broker.Options{Listen: []string{"mqtt://127.0.0.1:0", "coap://127.0.0.1:0"}})
	common := []string{"transport", "protocol", "url", "used_0rtt", "tls_resumed", "rejected_0rtt",
		"dial_start_ns", "transport_ready_ns", "connack_ns", "dial_ms", "transport_ready_ms", "connack_ms"}
	for _, c := range []struct {
		scheme      string
		has, hasNot []string
	}{
		{"mqtt", []string{"client_id", "session_present"}, []string{"connection"}},
		{"coap", nil, []string{"connection", "client_id", "session_present"}},
	} {
		url := brokertest.Endpoint(t, srv, c.scheme)
		ready := filepath.Join(t.TempDir(), "ready")
		sub := startCLI(ctx, "sub", "--url", url, "-t", "st/a", "-q", "1", "-n", "1", "--timeout", "20s", "--stats", "json", "--ready-file", ready)
		waitFile(t, ready)
		code, out, errs := runCLI(ctx, "pub", "--url", url, "-t", "st/a", "-q", "1", "--size", "32", "--stats", "json")
		if code != exitOK {
			t.Fatalf("%s pub: exit %d: %s", c.scheme, code, errs)
		}
		sub.wait(t)
		if sub.code != exitOK {
			t.Fatalf("%s sub: exit %d: %s", c.scheme, sub.code, sub.errb.String())
		}
		for role, s := range map[string]string{"pub": out, "sub": sub.out.String()} {
			line := jsonLine(t, s)
			keys := topKeys(t, line)
			for k, n := range keys {
				if n != 1 {
					t.Errorf("%s %s: key %q appears %d times", c.scheme, role, k, n)
				}
			}
			for _, k := range append(append([]string{"role"}, common...), c.has...) {
				if keys[k] == 0 {
					t.Errorf("%s %s: no %q in %s", c.scheme, role, k, line)
				}
			}
			for _, k := range c.hasNot {
				if keys[k] != 0 {
					t.Errorf("%s %s: %q present in %s", c.scheme, role, k, line)
				}
			}
			f := filepath.Join(t.TempDir(), role+".stdout")
			if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
				t.Fatal(err)
			}
			if cs, ok := records.ReadConnectionStats(f); !ok || cs.Transport != c.scheme || cs.DialStartNs == 0 {
				t.Errorf("%s %s: ReadConnectionStats %v %+v", c.scheme, role, ok, cs)
			}
		}
	}
}

// jsonLine returns the last line of out that is a JSON object.
func jsonLine(t *testing.T, out string) string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "{") {
			return lines[i]
		}
	}
	t.Fatalf("no JSON object in %q", out)
	return ""
}

// topKeys counts the keys of the JSON object's top level as written (a
// map would hide a key written twice).
func topKeys(t *testing.T, line string) map[string]int {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(line)))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %v %v", tok, err)
	}
	keys := map[string]int{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys[tok.(string)]++
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}
