package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/broker/brokertest"
	"github.com/iotq/iotq/records"
)

// TestPubTopicsFlagErrors: --topics beside flags it does not combine with,
// or without what it needs, is a usage error (exit 2) that says what to
// give instead, before any connection is tried.
func TestPubTopicsFlagErrors(t *testing.T) {
	ctx := context.Background()
	base := []string{"pub", "--url", "mqtt://127.0.0.1:1", "-t", "e9"}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--topics", "3", "--interval", "10ms"}, "--topics needs --size N"},
		{[]string{"--topics", "3", "--size", "100"}, "--topics needs a positive --interval"},
		{[]string{"--topics", "3", "--size", "100", "--interval", "10ms", "-m", "x"}, "does not combine with -m"},
		{[]string{"--topics", "3", "--size", "100", "--interval", "10ms", "--closed-loop", "--early"}, "does not combine with --closed-loop, --early"},
		{[]string{"--topics", "3", "--size", "100", "--interval", "10ms", "--gate", "stdin"}, "--gate"},
		{[]string{"--topics", "-1", "--size", "100", "--interval", "10ms"}, "--topics -1: want at least 1"},
		{[]string{"--topics", "5000", "--size", "100", "--interval", "10ms"}, "want at most 1000"},
		{[]string{"--large-size", "65536", "--large-interval", "2s", "--size", "100", "--interval", "10ms"}, "go with --topics N"},
		{[]string{"--topics", "3", "--size", "100", "--interval", "10ms", "--large-size", "65536"}, "give both (for example --large-size 65536 --large-interval 2s) or neither"},
		{[]string{"--topics", "3", "--size", "100", "--interval", "10ms", "--large-interval", "2s"}, "give both"},
		{[]string{"--topics", "3", "--size", "8", "--interval", "10ms"}, "minimum is 16"},
		{[]string{"--topics", "3", "--size", "100", "--interval", "10ms", "--large-size", "8", "--large-interval", "1s"}, "large size"},
	}
	for _, c := range cases {
		args := append(append([]string(nil), base...), c.args...)
		code, _, errOut := runCLI(ctx, args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", c.args, code, errOut, c.want)
		}
	}
	if code, _, errOut := runCLI(ctx, "pub", "--topics", "3", "--size", "100", "--interval", "10ms"); code != 2 || !strings.Contains(errOut, "TOPIC/0 ... TOPIC/N-1") {
		t.Errorf("no -t: exit %d, %q", code, errOut)
	}
}

// TestPubTopicsRecords: iotq pub --topics publishes every topic's messages
// and the large topic's over one connection to a real broker, and its
// records name each message's topic with seq counting across them; iotq
// sub with TOPIC/# receives them all.
func TestPubTopicsRecords(t *testing.T) {
	ctx := context.Background()
	srv := brokertest.Start(t, broker.Options{})
	url := brokertest.Endpoint(t, srv, "mqtt")
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	// 3 topics x 4 messages every 40 ms (a 160 ms run), and the large
	// topic every 100 ms within it: at 6.7 ms and 106.7 ms
	const want = 3*4 + 2
	sub := startCLI(ctx, "sub", "--url", url, "-t", "e9/m/#", "-q", "1", "-n", "14", "--timeout", "20s",
		"--ready-file", ready, "--records", filepath.Join(dir, "sub.csv"), "--quiet")
	waitFile(t, ready)
	code, _, errOut := runCLI(ctx, "pub", "--url", url, "-t", "e9/m", "-q", "1", "--topics", "3", "--size", "100",
		"-n", "4", "--interval", "40ms", "--large-size", "4096", "--large-interval", "100ms",
		"--records", filepath.Join(dir, "pub.csv"), "--timeout", "10s")
	if code != 0 {
		t.Fatalf("pub: exit %d: %s", code, errOut)
	}
	sub.wait(t)
	pubs, _, err := records.ReadFile[records.PubRecord](filepath.Join(dir, "pub.csv"))
	if err != nil || len(pubs) != want {
		t.Fatalf("pub.csv: %v, %d rows, want %d", err, len(pubs), want)
	}
	perTopic := map[string]int{}
	seqs := map[int64]bool{}
	for _, p := range pubs {
		perTopic[p.Topic]++
		if seqs[p.Seq] || !p.OK {
			t.Errorf("row %+v: seq twice or not accepted", p)
		}
		seqs[p.Seq] = true
		if wantSize := 100; strings.HasSuffix(p.Topic, "/large") {
			if p.Size != 4096 {
				t.Errorf("large message of %d bytes", p.Size)
			}
		} else if p.Size != wantSize {
			t.Errorf("%s: message of %d bytes", p.Topic, p.Size)
		}
	}
	for _, tp := range []string{"e9/m/0", "e9/m/1", "e9/m/2"} {
		if perTopic[tp] != 4 {
			t.Errorf("%s: %d messages, want 4 (%v)", tp, perTopic[tp], perTopic)
		}
	}
	if perTopic["e9/m/large"] != 2 {
		t.Errorf("e9/m/large: %d messages, want 2 (%v)", perTopic["e9/m/large"], perTopic)
	}
	for s := range int64(want) {
		if !seqs[s] {
			t.Errorf("seq %d missing: seq counts 0..%d across the topics", s, want-1)
		}
	}
	subs, _, err := records.ReadFile[records.SubRecord](filepath.Join(dir, "sub.csv"))
	if err != nil || len(subs) != want {
		t.Fatalf("sub.csv: %v, %d rows, want %d", err, len(subs), want)
	}
	for _, s := range subs {
		if perTopic[s.Topic] == 0 || s.Duplicate {
			t.Errorf("sub row %+v: unknown topic or duplicate", s)
		}
	}
}
