package lab

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/iotq/iotq/internal/atomicfile"
	"github.com/iotq/iotq/records"
)

// Files of a results directory (records.File*, docs/records.md).
const (
	FileMessages    = records.FileMessages
	FileConnections = records.FileConnections
	FileLinks       = records.FileLinks
	FileCPU         = records.FileCPU
	FileCompletions = records.FileCompletions
	FileCells       = records.FileCells
	FileDone        = records.FileDone
	FileManifest    = records.FileManifest
	FileScenario    = records.FileScenario
	FileCampaign    = records.FileCampaign
	DirCells        = records.DirCells
)

// recordFile is one per-cell record file that Aggregate concatenates
// into DIR.
type recordFile struct {
	name string
	// create writes the file with its header only.
	create func(path string) error
	// concat writes dst from the rows of srcs (missing ones are skipped).
	concat func(dst string, srcs []string) error
}

func recordFileOf[T any](name string) recordFile {
	return recordFile{name: name,
		create: func(path string) error { return concatRecords[T](path, nil) },
		concat: concatRecords[T]}
}

// recordFiles lists the per-cell files that are concatenated into DIR.
func recordFiles() []recordFile {
	return []recordFile{
		recordFileOf[records.Message](FileMessages),
		recordFileOf[records.Connection](FileConnections),
		recordFileOf[records.LinkCount](FileLinks),
		recordFileOf[records.CPU](FileCPU),
		recordFileOf[records.Completion](FileCompletions),
	}
}

// concatRecords writes dst from the rows of srcs, read by column name.
func concatRecords[T any](dst string, srcs []string) error {
	return writeRecords(dst, func(out *records.Writer[T]) error {
		for _, src := range srcs {
			rows, _, err := records.ReadFile[T](src)
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, records.ErrNoHeader) {
				continue
			}
			if err != nil {
				return fmt.Errorf("read %s: %w", src, err)
			}
			for _, r := range rows {
				if err := out.Write(r); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// writeRecords writes the record file dst with the rows fill writes,
// atomically (internal/atomicfile): a reader never sees half a file.
func writeRecords[T any](dst string, fill func(*records.Writer[T]) error) error {
	return atomicfile.Write(dst, 0o644, func(w io.Writer) error {
		out, err := records.NewWriter[T](w)
		if err != nil {
			return err
		}
		if err := fill(out); err != nil {
			return err
		}
		return out.Flush()
	})
}

// Cell statuses in done.json.
const (
	StatusOK     = records.StatusOK
	StatusFailed = records.StatusFailed
)

// Done is the content of a cell's done marker (records.Done).
type Done = records.Done

// CellSummary is what a CellRunner reports for the cells.csv row.
type CellSummary struct {
	Published int // messages the publishers reported as published
	Delivered int // distinct messages the subscriber received
	RepsOK    int // repetitions that completed without error
	// SendLate is how late the cell's paced publishers sent their
	// messages against each one's due time (nil: none paced).
	SendLate *records.Lateness
}

// readDone reads DIR/cells/ID/done.json; ok is false when it is absent.
func readDone(cellDir string) (Done, bool, error) { return records.ReadDone(cellDir) }

func writeFileAtomic(path string, data []byte) error { return records.WriteFileAtomic(path, data) }

func writeJSONAtomic(path string, v any) error { return records.WriteJSONAtomic(path, v) }

// completedCells lists the cells of dir that have a done marker, ordered
// by their position in order (the campaign's cell order); cells not in
// order come last, sorted by id.
func completedCells(dir string, order []string) ([]Done, error) {
	entries, err := os.ReadDir(filepath.Join(dir, DirCells))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list cells: %w", err)
	}
	pos := map[string]int{}
	for i, id := range order {
		pos[id] = i
	}
	var out []Done
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		d, ok, err := readDone(filepath.Join(dir, DirCells, e.Name()))
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, d)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		pi, iok := pos[out[i].Cell.ID]
		pj, jok := pos[out[j].Cell.ID]
		switch {
		case iok && jok:
			return pi < pj
		case iok != jok:
			return iok
		}
		return out[i].Cell.ID < out[j].Cell.ID
	})
	return out, nil
}

// Aggregate rebuilds DIR's aggregate CSV files (cells.csv and the record
// files) from the completed cell directories. Cells without a done marker
// are ignored. order is the campaign's cell order (may be nil).
func Aggregate(dir string, order []string) error {
	done, err := completedCells(dir, order)
	if err != nil {
		return err
	}
	for _, rf := range recordFiles() {
		srcs := make([]string, len(done))
		for i, d := range done {
			srcs[i] = filepath.Join(dir, DirCells, d.Cell.ID, rf.name)
		}
		if err := rf.concat(filepath.Join(dir, rf.name), srcs); err != nil {
			return err
		}
	}
	return writeCellsCSV(filepath.Join(dir, FileCells), done)
}

func writeCellsCSV(path string, done []Done) error {
	return writeRecords(path, func(out *records.Writer[records.CellRow]) error {
		for _, d := range done {
			if err := out.Write(d.Row()); err != nil {
				return err
			}
		}
		return nil
	})
}
