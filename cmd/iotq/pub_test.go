package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"github.com/iotq/iotq/internal/testutil"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// startMosquittoCLI starts a Mosquitto broker on a free loopback port for
// the pub/sub CLI tests and returns its mqtt:// URL.
func startMosquittoCLI(t *testing.T) string {
	t.Helper()
	url, _ := startMosquittoKill(t)
	return url
}

// startMosquittoKill is startMosquittoCLI that also returns a function
// that kills the broker.
func startMosquittoKill(t *testing.T) (string, func()) {
	t.Helper()
	m := testutil.StartMosquitto(t, "")
	return m.URL(), m.Kill
}

// syncBuffer is a bytes.Buffer safe for a writer and a concurrent reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runCLI runs one iotq invocation in-process.
func runCLI(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var so, se syncBuffer
	code = newApp(&so, &se).run(ctx, args)
	return code, so.String(), se.String()
}

// startCLI runs one iotq invocation in the background.
type cliRun struct {
	out, errb syncBuffer
	code      int
	done      chan struct{}
}

func startCLI(ctx context.Context, args ...string) *cliRun {
	r := &cliRun{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.code = newApp(&r.out, &r.errb).run(ctx, args)
	}()
	return r
}

func (r *cliRun) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("command did not end; stderr: %s", r.errb.String())
	}
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s not written", path)
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// lastJSON decodes the last line of out that is a JSON object.
func lastJSON(t *testing.T, out string) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "{") {
			var m map[string]any
			if err := json.Unmarshal([]byte(lines[i]), &m); err != nil {
				t.Fatalf("stats: %v: %s", err, lines[i])
			}
			return m
		}
	}
	t.Fatalf("no JSON object in output: %q", out)
	return nil
}

// TestPubSubEndToEnd runs sub and pub in-process against Mosquitto, with
// measurement payloads, --stats json and --records, for both MQTT versions
// and QoS 0/1/2.
func TestPubSubEndToEnd(t *testing.T) {
	url := startMosquittoCLI(t)
	for _, proto := range []string{"3", "5"} {
		for _, qos := range []string{"0", "1", "2"} {
			t.Run("protocol "+proto+" qos "+qos, func(t *testing.T) {
				dir := t.TempDir()
				topic := "e2e/" + proto + "/" + qos
				ready := filepath.Join(dir, "ready")
				subRec, pubRec := filepath.Join(dir, "sub.csv"), filepath.Join(dir, "pub.csv")
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				sub := startCLI(ctx, "sub", "--url", url, "-t", topic, "-q", qos, "-n", "10", "--timeout", "10s",
					"--protocol", proto, "--stats", "json", "--records", subRec, "--ready-file", ready)
				waitFile(t, ready)
				code, out, errOut := runCLI(ctx, "pub", "--url", url, "-t", topic, "-q", qos, "--size", "64", "-n", "10",
					"--interval", "2ms", "--protocol", proto, "--stats", "json", "--records", pubRec)
				if code != 0 {
					t.Fatalf("pub exit %d: %s", code, errOut)
				}
				sub.wait(t)
				if sub.code != 0 {
					t.Fatalf("sub exit %d: %s", sub.code, sub.errb.String())
				}
				ps := lastJSON(t, out)
				for k, want := range map[string]any{"transport": "mqtt", "sent": 10.0, "acked": 10.0, "failed": 0.0, "used_0rtt": false, "tls_resumed": false} {
					if ps[k] != want {
						t.Errorf("pub stats %s = %v, want %v", k, ps[k], want)
					}
				}
				for _, k := range []string{"dial_ms", "transport_ready_ms", "connack_ms", "dial_start_ns", "transport_ready_ns", "connack_ns"} {
					if v, ok := ps[k].(float64); !ok || v <= 0 {
						t.Errorf("pub stats %s = %v, want > 0", k, ps[k])
					}
				}
				if _, ok := ps["connection"]; ok {
					t.Errorf("pub stats repeat the connection facts under \"connection\": %v", ps["connection"])
				}
				ss := lastJSON(t, sub.out.String())
				if ss["received"] != 10.0 || ss["duplicates"] != 0.0 {
					t.Errorf("sub stats received %v duplicates %v", ss["received"], ss["duplicates"])
				}
				d, _ := ss["delay"].(map[string]any)
				if d["n"] != 10.0 {
					t.Fatalf("delay summary %v", d)
				}
				for _, k := range []string{"mean_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms"} {
					if v, ok := d[k].(float64); !ok || v <= 0 || v > d["max_ms"].(float64) {
						t.Errorf("delay %s = %v", k, d[k])
					}
				}
				pr := readCSV(t, pubRec)
				if strings.Join(pr[0], ",") != "seq,size,send_ns,accepted_ns,ok,error,topic,ready_ns" || len(pr) != 11 {
					t.Fatalf("pub records header %v, %d rows", pr[0], len(pr))
				}
				sr := readCSV(t, subRec)
				if strings.Join(sr[0], ",") != "seq,size,send_ns,recv_ns,delay_ns,topic,qos,duplicate" || len(sr) != 11 {
					t.Fatalf("sub records header %v, %d rows", sr[0], len(sr))
				}
				for i := 1; i <= 10; i++ {
					// The send time in the payload is the one pub recorded.
					if pr[i][0] != sr[i][0] || pr[i][2] != sr[i][2] || pr[i][4] != "true" || sr[i][5] != topic || sr[i][6] != qos || sr[i][1] != "64" {
						t.Fatalf("row %d: pub %v sub %v", i, pr[i], sr[i])
					}
					if pr[i][3] < pr[i][2] {
						t.Fatalf("row %d accepted before sent: %v", i, pr[i])
					}
				}
			})
		}
	}
}

// TestPubGateStopAndWait drives pub with --gate from sub's --notify output,
// as the lab does: each message waits for one line.
func TestPubGateStopAndWait(t *testing.T) {
	url := startMosquittoCLI(t)
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub := startCLI(ctx, "sub", "--url", url, "-t", "gate/t", "-q", "1", "-n", "5", "--timeout", "10s", "--notify", "stdout", "--ready-file", ready)
	waitFile(t, ready)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	pubRec := filepath.Join(dir, "pub.csv")
	pub := startCLI(ctx, "pub", "--url", url, "-t", "gate/t", "-q", "1", "--size", "32", "-n", "100",
		"--gate", fmt.Sprintf("/proc/self/fd/%d", pr.Fd()), "--records", pubRec)
	// Relay: one start line, then one line per "recv N" from sub; stop
	// after 5 messages by closing the gate (end of input).
	if _, err := pw.Write([]byte("start\n")); err != nil {
		t.Fatal(err)
	}
	relayed := 0
	for deadline := time.Now().Add(15 * time.Second); relayed < 5 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		n := strings.Count(sub.out.String(), "recv ")
		for ; relayed < n; relayed++ {
			if relayed < 4 {
				pw.Write([]byte("go\n"))
			}
		}
	}
	// Only one message may be in flight: by now exactly 5 were sent.
	time.Sleep(100 * time.Millisecond)
	pw.Close()
	pub.wait(t)
	sub.wait(t)
	if pub.code != 0 || sub.code != 0 {
		t.Fatalf("pub exit %d (%s), sub exit %d (%s)", pub.code, pub.errb.String(), sub.code, sub.errb.String())
	}
	if got := sub.out.String(); got != "recv 0\nrecv 1\nrecv 2\nrecv 3\nrecv 4\n" {
		t.Fatalf("sub --notify output %q", got)
	}
	if rows := readCSV(t, pubRec); len(rows) != 6 {
		t.Fatalf("pub sent %d messages, want 5 (one per gate line)", len(rows)-1)
	}
}

// TestPubSubErrors: bad flags exit 2 with a hint; an unreachable broker
// exits 1 and says what to check; plain messages print as TOPIC PAYLOAD.
func TestPubSubErrors(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"pub", "-t", "a"}, 2, "give -m MESSAGE (-m '' for an empty one), -f FILE, -s"},
		{[]string{"pub", "-t", "a", "--size", "8"}, 2, "minimum is 16"},
		{[]string{"pub", "-t", "a/#", "-m", "x"}, 2, "wildcards belong in subscription filters"},
		{[]string{"pub", "-t", "a", "-m", "x", "-q", "3"}, 2, "want 0, 1 or 2"},
		{[]string{"pub", "-t", "a", "-m", "x", "--protocol", "4.5"}, 2, "invalid value"},
		{[]string{"pub", "-t", "a", "-m", "x", "--url", "http://x"}, 2, "unknown scheme"},
		{[]string{"sub"}, 2, "-t FILTER is required"},
		{[]string{"pub", "--url", "mqtt://127.0.0.1:1", "-t", "a", "-m", "x"}, 1, "check that a server listens at 127.0.0.1:1"},
		{[]string{"sub", "--url", "mqtt://127.0.0.1:1", "-t", "a"}, 1, "check that a server listens at 127.0.0.1:1"},
	}
	for _, c := range cases {
		code, _, errOut := runCLI(ctx, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, errOut, c.code, c.want)
		}
	}

	url := startMosquittoCLI(t)
	ready := filepath.Join(t.TempDir(), "ready")
	sub := startCLI(ctx, "sub", "--url", url, "-t", "plain/#", "-n", "1", "--timeout", "10s", "--ready-file", ready)
	waitFile(t, ready)
	if code, _, e := runCLI(ctx, "pub", "--url", url, "-t", "plain/x", "-m", "hello world", "-r"); code != 0 {
		t.Fatalf("pub: %s", e)
	}
	sub.wait(t)
	if got := sub.out.String(); got != "plain/x hello world\n" {
		t.Fatalf("sub printed %q", got)
	}
	// -n not reached before --timeout: exit 1 with the count.
	code, _, errOut := runCLI(ctx, "sub", "--url", url, "-t", "nothing/here", "-n", "3", "--timeout", "200ms")
	if code != 1 || !strings.Contains(errOut, "received 0 of 3") {
		t.Fatalf("idle timeout: exit %d, %q", code, errOut)
	}
}

// TestSubDuplicates: two publisher runs reusing sequence numbers on one
// topic, under other client ids, are told apart by the run id of the
// payload: no duplicates, and every message counts in the delay summary.
func TestSubDuplicates(t *testing.T) {
	url := startMosquittoCLI(t)
	dir := t.TempDir()
	ready, rec := filepath.Join(dir, "ready"), filepath.Join(dir, "sub.csv")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub := startCLI(ctx, "sub", "--url", url, "-t", "dup", "-q", "1", "-n", "6", "--timeout", "10s", "--stats", "json", "--quiet", "--records", rec, "--ready-file", ready)
	waitFile(t, ready)
	for i := 0; i < 2; i++ {
		if code, _, e := runCLI(ctx, "pub", "--url", url, "-t", "dup", "-q", "1", "--size", "32", "-n", "3", "--client-id", fmt.Sprintf("dev-%d", i)); code != 0 {
			t.Fatalf("pub: %s", e)
		}
	}
	sub.wait(t)
	st := lastJSON(t, sub.out.String())
	if st["received"] != 6.0 || st["measured"] != 6.0 || st["duplicates"] != 0.0 || st["delay"].(map[string]any)["n"] != 6.0 {
		t.Fatalf("stats received %v measured %v duplicates %v delay %v", st["received"], st["measured"], st["duplicates"], st["delay"])
	}
	rows := readCSV(t, rec)
	var dups []string
	for _, r := range rows[1:] {
		if r[7] == "true" {
			dups = append(dups, r[0])
		}
	}
	if len(dups) != 0 {
		t.Fatalf("duplicate rows for seq %v, want none", dups)
	}
}

// TestPubBrokerGoesAway: the broker dies in the middle of a run; pub stops,
// exits 1, and says how many messages were not accepted.
func TestPubBrokerGoesAway(t *testing.T) {
	url, kill := startMosquittoKill(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec := filepath.Join(t.TempDir(), "pub.csv")
	pub := startCLI(ctx, "pub", "--url", url, "-t", "away", "-q", "1", "--size", "20", "-n", "1000", "--interval", "20ms", "--records", rec, "--stats", "json")
	time.Sleep(300 * time.Millisecond)
	kill()
	pub.wait(t)
	if pub.code != 1 || !strings.Contains(pub.errb.String(), "of 1000 messages") {
		t.Fatalf("exit %d, stderr %q", pub.code, pub.errb.String())
	}
	st := lastJSON(t, pub.out.String())
	sent, acked := st["sent"].(float64), st["acked"].(float64)
	if acked < 1 || sent >= 1000 || acked+st["failed"].(float64) != sent {
		t.Fatalf("sent %v acked %v failed %v", sent, acked, st["failed"])
	}
	if rows := readCSV(t, rec); float64(len(rows)-1) != sent {
		t.Fatalf("%d record rows for %v sent", len(rows)-1, sent)
	}
}
