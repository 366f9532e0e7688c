package lab

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/iotq/iotq/records"
)

// readNodeRecords reads a node's records file (pub.csv, sub.csv); a
// missing file has no rows.
func readNodeRecords[T any](path string) ([]T, error) {
	rows, _, err := records.ReadFile[T](path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, records.ErrNoHeader) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return rows, nil
}

// firstReceipt of each distinct sequence number (per topic).
type receiptKey struct {
	topic string
	seq   int64
}

func firstReceipts(subs []records.SubRecord) map[receiptKey]records.SubRecord {
	m := map[receiptKey]records.SubRecord{}
	for _, s := range subs {
		k := receiptKey{s.Topic, s.Seq}
		if cur, ok := m[k]; !ok || s.RecvNs < cur.RecvNs {
			m[k] = s
		}
	}
	return m
}

// cellWriters hold a cell's record files while it runs.
type cellWriters struct {
	messages    *records.Writer[records.Message]
	connections *records.Writer[records.Connection]
	links       *records.Writer[records.LinkCount]
	cpu         *records.Writer[records.CPU]
	completions *records.Writer[records.Completion]
}

func openCellWriters(dir string) (*cellWriters, error) {
	var errs []error
	w := &cellWriters{
		messages:    create[records.Message](dir, FileMessages, &errs),
		connections: create[records.Connection](dir, FileConnections, &errs),
		links:       create[records.LinkCount](dir, FileLinks, &errs),
		cpu:         create[records.CPU](dir, FileCPU, &errs),
		completions: create[records.Completion](dir, FileCompletions, &errs),
	}
	if len(errs) > 0 {
		w.close()
		return nil, errors.Join(errs...)
	}
	return w, nil
}

func create[T any](dir, name string, errs *[]error) *records.Writer[T] {
	w, err := records.Create[T](filepath.Join(dir, name))
	if err != nil {
		*errs = append(*errs, err)
	}
	return w
}

func (w *cellWriters) close() error {
	err := errors.Join(w.messages.Close(), w.connections.Close(), w.links.Close(), w.cpu.Close(), w.completions.Close())
	if err != nil {
		return fmt.Errorf("record files: %w", err)
	}
	return nil
}
