// Command gen writes the shipped traces of package trace (data/NAME.trace)
// from their models, and data/README.md describing them. Run it with `go
// generate ./link/trace`.
package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/iotq/iotq/link/trace"
)

func main() {
	if err := run("data"); err != nil {
		slog.Error("generate traces", "error", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	var readme bytes.Buffer
	readme.WriteString(trace.ReadmeHeader)
	for _, m := range trace.Models() {
		t, err := m.Generate()
		if err != nil {
			return err
		}
		var b bytes.Buffer
		if err := t.Write(&b); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, m.Name+".trace"), b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write trace: %w", err)
		}
		readme.WriteString(trace.Describe(m, t))
	}
	return os.WriteFile(filepath.Join(dir, "README.md"), readme.Bytes(), 0o644)
}
