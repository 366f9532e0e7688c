package artemis

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestCommand(t *testing.T) {
	t.Setenv("IOTQ_CACHE", t.TempDir())
	if _, err := Command(Options{}); !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "scripts/setup.sh") {
		t.Fatalf("empty cache: %v, want ErrNotInstalled with the fix", err)
	}
	if !strings.HasSuffix(Dir(), "artemis-"+Version) {
		t.Fatalf("Dir %s", Dir())
	}
}

func TestCommandArgs(t *testing.T) {
	cmd, err := Command(Options{Host: "10.0.0.1", Port: 5682, StopOnEOF: true})
	if errors.Is(err, ErrNotInstalled) {
		if os.Getenv("CI") == "true" {
			t.Fatal(err) // CI runs scripts/setup.sh
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Broker", "10.0.0.1", "5682", "--stop-on-eof"} {
		if !slices.Contains(cmd.Args, want) {
			t.Errorf("args %q lack %q", cmd.Args, want)
		}
	}
	if _, err := Command(Options{TLSPort: 1}); err == nil {
		t.Error("TLS acceptor without a key store accepted")
	}
}
