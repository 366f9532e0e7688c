package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBrokerFlagsWinOverConfig: a flag given on the command line replaces
// the file's value; a flag not given keeps it (also a flag whose default
// differs from the file's value).
func TestBrokerFlagsWinOverConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "broker.yaml")
	if err := os.WriteFile(cfg, []byte("listen: [\"mqtt://127.0.0.1:0\"]\nflow:\n  queue_length: 99\n  max_stall: 5s\nquic:\n  allow_0rtt: false\nlog:\n  level: warn\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := newApp(&out, &errb).run(context.Background(), []string{"broker", "--config", cfg, "--queue-length", "7", "--allow-anonymous=false", "--print-config"})
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{
		"queue_length: 7",        // flag wins
		"max_stall: 5s",          // file kept (flag default is 2s)
		"early_data: refuse",     // file kept (allow_0rtt: false; flag default is hold)
		"allow_anonymous: false", // flag given
		"level: warn",            // file kept
		"- mqtt://127.0.0.1:0",   // file kept
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("effective configuration lacks %q:\n%s", want, out.String())
		}
	}
}
