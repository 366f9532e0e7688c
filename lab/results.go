package lab

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// Per-cell record files (in DIR/cells/CELL/) and their aggregate in DIR.
// Each per-cell file has the same header as the aggregate.
const (
	FileMessages    = "messages.csv"
	FileConnections = "connections.csv"
	FileLinks       = "links.csv"
	FileCPU         = "cpu.csv"
	FileCompletions = "completions.csv"
	FileCells       = "cells.csv"
	FileDone        = "done.json"
	FileManifest    = "manifest.json"
	FileScenario    = "scenario.yaml"
	FileCampaign    = "campaign.json"
	DirCells        = "cells"
)

// Headers of the record files (docs/records.md). messages.csv has one row
// per published message; recv_ns and delay_ns are empty when the message
// never arrived.
var (
	HeaderMessages    = []string{"cell", "rep", "protocol", "transport", "qos", "seq", "size", "send_ns", "recv_ns", "delay_ns", "node", "topic"}
	HeaderConnections = []string{"cell", "rep", "role", "node", "transport", "dial_start_ns", "transport_ready_ns", "connack_ns", "first_delivery_ns", "resumed", "used_0rtt"}
	HeaderLinks       = []string{"cell", "rep", "link", "direction", "packets", "bytes", "drop_random", "drop_queue", "drop_retries", "drop_down"}
	HeaderCPU         = []string{"cell", "rep", "node", "role", "user_ns", "sys_ns"}
	HeaderCompletions = []string{"cell", "rep", "transport", "start_ns", "end_ns", "completion_ns", "delivered", "published"}
	HeaderCells       = []string{"cell", "experiment", "profile", "loss_pct", "transport", "qos", "pattern", "size", "interval_ns",
		"messages", "repetitions", "topology", "publishers", "retries", "delay_convention",
		"pub_link", "pub_rate_bps", "pub_delay_ns", "sub_link", "sub_rate_bps", "sub_delay_ns", "path_delay_ns",
		"tcp_congestion", "seed", "published", "delivered", "reps_ok", "status", "error", "start_ns", "end_ns"}
)

// recordFiles lists the per-cell files that are concatenated into DIR.
var recordFiles = []struct {
	name   string
	header []string
}{
	{FileMessages, HeaderMessages},
	{FileConnections, HeaderConnections},
	{FileLinks, HeaderLinks},
	{FileCPU, HeaderCPU},
	{FileCompletions, HeaderCompletions},
}

// Cell statuses in done.json.
const (
	StatusOK     = "ok"
	StatusFailed = "failed"
)

// Done is the content of a cell's done marker.
type Done struct {
	Cell      Cell   `json:"cell"`
	Status    string `json:"status"`
	Error     string `json:"error,omitempty"`
	StartNs   int64  `json:"start_ns"`
	EndNs     int64  `json:"end_ns"`
	Published int    `json:"published"`
	Delivered int    `json:"delivered"`
	RepsOK    int    `json:"reps_ok"`
}

// CellSummary is what a CellRunner reports for the cells.csv row.
type CellSummary struct {
	Published int // messages the publishers reported as published
	Delivered int // distinct messages the subscriber received
	RepsOK    int // repetitions that completed without error
}

// readDone reads DIR/cells/ID/done.json; ok is false when it is absent.
func readDone(cellDir string) (Done, bool, error) {
	b, err := os.ReadFile(filepath.Join(cellDir, FileDone))
	if errors.Is(err, os.ErrNotExist) {
		return Done{}, false, nil
	}
	if err != nil {
		return Done{}, false, fmt.Errorf("read done marker: %w", err)
	}
	var d Done
	if err := json.Unmarshal(b, &d); err != nil {
		return Done{}, false, fmt.Errorf("%s: corrupt done marker (delete the cell directory to rerun it): %w", cellDir, err)
	}
	return d, true, nil
}

// writeFileAtomic writes via a temporary file and rename, so a reader (or
// an interrupted run) never sees half a file.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func writeJSONAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return writeFileAtomic(path, append(b, '\n'))
}

// csvFile is a CSV writer for one record file.
type csvFile struct {
	f *os.File
	w *csv.Writer
}

func createCSV(path string, header []string) (*csvFile, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	c := &csvFile{f: f, w: csv.NewWriter(f)}
	if err := c.w.Write(header); err != nil {
		f.Close()
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return c, nil
}

func (c *csvFile) Write(row []string) error { return c.w.Write(row) }

func (c *csvFile) Close() error {
	c.w.Flush()
	err := c.w.Error()
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("close %s: %w", c.f.Name(), err)
	}
	return nil
}

// readCSV reads a CSV file with a header; a missing file yields no rows.
func readCSV(path string) (header []string, rows [][]string, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	r := csv.NewReader(bufio.NewReader(f))
	r.FieldsPerRecord = -1
	header, err = r.Read()
	if errors.Is(err, io.EOF) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", path, err)
	}
	for {
		row, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read %s: %w", path, err)
		}
		rows = append(rows, row)
	}
	return header, rows, nil
}

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
	for _, rf := range recordFiles {
		if err := concatCSV(dir, rf.name, rf.header, done); err != nil {
			return err
		}
	}
	return writeCellsCSV(filepath.Join(dir, FileCells), done)
}

func concatCSV(dir, name string, header []string, done []Done) error {
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	out, err := createCSV(tmp, header)
	if err != nil {
		return err
	}
	for _, d := range done {
		h, rows, err := readCSV(filepath.Join(dir, DirCells, d.Cell.ID, name))
		if err != nil {
			out.Close()
			return err
		}
		if h != nil && !equalStrings(h, header) {
			out.Close()
			return fmt.Errorf("cell %s: %s has header %v, want %v", d.Cell.ID, name, h, header)
		}
		for _, r := range rows {
			if err := out.Write(r); err != nil {
				out.Close()
				return fmt.Errorf("write %s: %w", path, err)
			}
		}
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func writeCellsCSV(path string, done []Done) error {
	tmp := path + ".tmp"
	out, err := createCSV(tmp, HeaderCells)
	if err != nil {
		return err
	}
	for _, d := range done {
		c := d.Cell
		row := []string{c.ID, c.Experiment, c.Profile, fmtF(c.LossPct), c.Transport, strconv.Itoa(c.QoS), c.Pattern,
			strconv.Itoa(c.Size), i64(c.IntervalNs), strconv.Itoa(c.Messages), strconv.Itoa(c.Repetitions), c.Kind,
			strconv.Itoa(c.Publishers), strconv.Itoa(c.Retries), c.DelayConvention,
			c.PubLink.Name, i64(c.PubLink.RateBps), i64(c.PubLink.DelayNs),
			c.SubLink.Name, i64(c.SubLink.RateBps), i64(c.SubLink.DelayNs), i64(int64(c.PathDelay())),
			c.TCPCongestion, i64(c.Seed), strconv.Itoa(d.Published), strconv.Itoa(d.Delivered), strconv.Itoa(d.RepsOK),
			d.Status, d.Error, i64(d.StartNs), i64(d.EndNs)}
		if err := out.Write(row); err != nil {
			out.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func i64(v int64) string    { return strconv.FormatInt(v, 10) }
func fmtF(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
