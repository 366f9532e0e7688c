package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/iotq/iotq/records"
)

// dataset is everything read from a results directory, through the types
// of package records.
type dataset struct {
	dir string
	// manifest is manifest.json as a tree, for the report's Run table;
	// man is the same file in the types of package records.
	manifest map[string]any
	man      records.Manifest
	// the record files; a nil slice with has* false: the file is absent
	cells    []records.CellRow
	messages []records.Message
	conns    []records.Connection
	links    []records.LinkCount
	cpu      []records.CPU
	compl    []records.Completion
	// cellCols are the columns of cells.csv (older writers left some out)
	cellCols []string
	hasCells bool
	notes    []string
	present  []string
}

// resultFiles are the files that make a directory a results directory.
var resultFiles = []string{records.FileManifest, records.FileCells, records.FileMessages, records.FileConnections,
	records.FileLinks, records.FileCPU, records.FileCompletions}

func load(dir string) (*dataset, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("results directory %s: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is a file: %w: pass the directory that `iotq lab run --out DIR` wrote", dir, ErrNotResults)
	}
	ds := &dataset{dir: dir}
	for _, f := range resultFiles {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			ds.present = append(ds.present, f)
		}
	}
	if len(ds.present) == 0 {
		return nil, fmt.Errorf("%s holds none of %s: %w: pass the directory that `iotq lab run --out DIR` wrote",
			dir, strings.Join(resultFiles, ", "), ErrNotResults)
	}
	if b, err := os.ReadFile(filepath.Join(dir, records.FileManifest)); err == nil {
		if err := json.Unmarshal(b, &ds.manifest); err != nil {
			ds.note("manifest.json is not valid JSON (%v): run metadata and link parameters from it are left out", err)
		} else {
			ds.man, _ = records.ParseManifest(b) // valid JSON: fields of other types stay zero
		}
	} else {
		ds.note("manifest.json is missing: run metadata is left out")
	}
	ds.cells, ds.cellCols, ds.hasCells = readRecords[records.CellRow](ds, records.FileCells, "cell parameters are taken from the cells' done.json")
	ds.messages, _, _ = readRecords[records.Message](ds, records.FileMessages, "no delay, delivery or message-based figures")
	ds.conns, _, _ = readRecords[records.Connection](ds, records.FileConnections, "no startup latency")
	ds.links, _, _ = readRecords[records.LinkCount](ds, records.FileLinks, "no packets per second or bytes per message")
	ds.cpu, _, _ = readRecords[records.CPU](ds, records.FileCPU, "no processor energy")
	ds.compl, _, _ = readRecords[records.Completion](ds, records.FileCompletions, "completion times are derived from messages.csv where possible")
	return ds, nil
}

// readRecords reads one record file of DIR; what says what is lost
// without it. ok is false when the file is absent or unreadable.
func readRecords[T any](ds *dataset, name, what string) (rows []T, header []string, ok bool) {
	rows, header, err := records.ReadFile[T](filepath.Join(ds.dir, name))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		ds.note("%s is missing: %s", name, what)
		return nil, nil, false
	case err != nil && header == nil:
		ds.note("%s could not be read (%v): %s", name, err, what)
		return nil, nil, false
	case err != nil:
		ds.note("%s is cut short (%v): only the rows before the error are used", name, err)
	}
	return rows, header, true
}

// hasCellCol reports whether cells.csv has the column.
func (ds *dataset) hasCellCol(name string) bool { return slices.Contains(ds.cellCols, name) }

// note records a remark for the report; line breaks (error texts carry
// them) are folded so that a note stays one Markdown list item.
func (ds *dataset) note(format string, args ...any) {
	s := strings.Join(strings.Fields(strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", " / ")), " ")
	ds.notes = append(ds.notes, s)
}
