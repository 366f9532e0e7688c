package serve

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
)

func TestNewLoggerFormatsAndLevels(t *testing.T) {
	var buf bytes.Buffer
	log, lv, err := NewLogger(&buf, LogOptions{Format: "JSON", Level: "warn"})
	if err != nil {
		t.Fatal(err)
	}
	log.Info("hidden")
	log.Warn("shown", "k", 1)
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil || rec["msg"] != "shown" || rec["k"] != float64(1) {
		t.Fatalf("json logger wrote %q (%v)", buf.String(), err)
	}
	lv.Set(slog.LevelError) // the level variable is the logger's
	buf.Reset()
	log.Warn("now hidden")
	if buf.Len() != 0 {
		t.Errorf("raised level still logs: %q", buf.String())
	}

	buf.Reset()
	log, _, err = NewLogger(&buf, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("hidden")
	log.Info("shown")
	if s := buf.String(); !strings.Contains(s, "msg=shown") || strings.Contains(s, "hidden") {
		t.Errorf("default (text, info) logger wrote %q", s)
	}

	for _, o := range []LogOptions{{Format: "xml"}, {Level: "loud"}} {
		if _, _, err := NewLogger(&buf, o); err == nil || !strings.Contains(err.Error(), "want") {
			t.Errorf("%+v: err = %v, want one saying what to write", o, err)
		}
	}
	if l, err := ParseLevel("WARNING"); err != nil || l != slog.LevelWarn {
		t.Errorf("ParseLevel(WARNING) = %v, %v", l, err)
	}
	if got := (LogOptions{}).WithDefaults(); got != (LogOptions{Format: "text", Level: "info"}) {
		t.Errorf("WithDefaults = %+v", got)
	}
}

func TestDefaultStateDir(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/x/state")
	if got := DefaultStateDir(); got != filepath.Join("/x/state", "iotq") {
		t.Errorf("with XDG_STATE_HOME: %s", got)
	}
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "/h")
	if got := DefaultStateDir(); got != filepath.Join("/h", ".local", "state", "iotq") {
		t.Errorf("with HOME only: %s", got)
	}
}
