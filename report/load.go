package report

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// table is a CSV file read by column name.
type table struct {
	name string
	col  map[string]int
	rows [][]string
}

// readTable reads a CSV file with a header row. A missing file returns an
// error that wraps fs.ErrNotExist.
func readTable(dir, name string) (*table, error) {
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	r.ReuseRecord = false
	header, err := r.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty file, want a header row", name)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	t := &table{name: name, col: map[string]int{}}
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		if _, dup := t.col[h]; !dup {
			t.col[h] = i
		}
	}
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return t, fmt.Errorf("%s: %w", name, err)
		}
		t.rows = append(t.rows, rec)
	}
	return t, nil
}

// has reports whether any of the named columns exists.
func (t *table) has(names ...string) bool {
	for _, n := range names {
		if _, ok := t.col[n]; ok {
			return true
		}
	}
	return false
}

// str returns the first present column of names in row, trimmed.
func (t *table) str(row []string, names ...string) string {
	for _, n := range names {
		if i, ok := t.col[n]; ok && i < len(row) {
			return strings.TrimSpace(row[i])
		}
	}
	return ""
}

// int64v parses an integer column; ok is false when it is absent or empty.
func (t *table) int64v(row []string, names ...string) (int64, bool) {
	s := t.str(row, names...)
	if s == "" {
		return 0, false
	}
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v, true
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
		return int64(f), true
	}
	return 0, false
}

func (t *table) intv(row []string, names ...string) int {
	v, _ := t.int64v(row, names...)
	return int(v)
}

func (t *table) floatv(row []string, names ...string) (float64, bool) {
	s := strings.TrimSuffix(t.str(row, names...), "%")
	if s == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

func (t *table) boolv(row []string, names ...string) bool {
	switch strings.ToLower(t.str(row, names...)) {
	case "1", "true", "yes", "y", "t":
		return true
	}
	return false
}

// durationNs reads a duration from one of several column spellings: a
// column ending in _ns, _us, _ms or _s holds a number in that unit; any
// other column may hold a Go duration ("25ms") or a number of nanoseconds.
func (t *table) durationNs(row []string, names ...string) (int64, bool) {
	for _, n := range names {
		if !t.has(n) {
			continue
		}
		s := t.str(row, n)
		if s == "" {
			continue
		}
		if d, err := time.ParseDuration(s); err == nil {
			return int64(d), true
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasSuffix(n, "_ns"):
			return int64(f), true
		case strings.HasSuffix(n, "_us"):
			return int64(f * 1e3), true
		case strings.HasSuffix(n, "_ms"):
			return int64(f * 1e6), true
		case strings.HasSuffix(n, "_s"):
			return int64(f * 1e9), true
		default:
			return int64(f), true
		}
	}
	return 0, false
}

// rateBps reads a rate: a number in bit/s (columns *_bps), Mbit/s (*_mbps,
// *_mbit) or tc text ("20mbit", "512kbit").
func (t *table) rateBps(row []string, names ...string) (float64, bool) {
	for _, n := range names {
		s := strings.ToLower(t.str(row, n))
		if s == "" {
			continue
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			if strings.HasSuffix(n, "_mbps") || strings.HasSuffix(n, "_mbit") {
				return f * 1e6, true
			}
			return f, true
		}
		if v, ok := parseTCRate(s); ok {
			return v, true
		}
	}
	return 0, false
}

func parseTCRate(s string) (float64, bool) {
	mult := map[string]float64{"gbit": 1e9, "mbit": 1e6, "kbit": 1e3, "bit": 1, "gbps": 8e9, "mbps": 8e6, "kbps": 8e3, "bps": 8}
	for _, suf := range []string{"gbit", "mbit", "kbit", "gbps", "mbps", "kbps", "bit", "bps"} {
		if strings.HasSuffix(s, suf) {
			f, err := strconv.ParseFloat(strings.TrimSuffix(s, suf), 64)
			if err != nil {
				return 0, false
			}
			return f * mult[suf], true
		}
	}
	return 0, false
}

// dataset is everything read from a results directory.
type dataset struct {
	dir      string
	manifest map[string]any
	cells    *table
	messages *table
	conns    *table
	links    *table
	cpu      *table
	compl    *table
	notes    []string
	present  []string
}

// resultFiles are the files that make a directory a results directory.
var resultFiles = []string{"manifest.json", "cells.csv", "messages.csv", "connections.csv", "links.csv", "cpu.csv", "completions.csv"}

func load(dir string) (*dataset, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("results directory %s: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is a file: %w: pass the directory that `iotq lab run --out DIR` wrote", dir, ErrNotResults)
	}
	ds := &dataset{dir: dir}
	found := 0
	for _, f := range resultFiles {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			found++
			ds.present = append(ds.present, f)
		}
	}
	if found == 0 {
		return nil, fmt.Errorf("%s holds none of %s: %w: pass the directory that `iotq lab run --out DIR` wrote",
			dir, strings.Join(resultFiles, ", "), ErrNotResults)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "manifest.json")); err == nil {
		if err := json.Unmarshal(b, &ds.manifest); err != nil {
			ds.note("manifest.json is not valid JSON (%v): run metadata and link parameters from it are left out", err)
		}
	} else {
		ds.note("manifest.json is missing: run metadata is left out")
	}
	get := func(name, what string) *table {
		t, err := readTable(dir, name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			ds.note("%s is missing: %s", name, what)
			return nil
		case err != nil && t == nil:
			ds.note("%s could not be read (%v): %s", name, err, what)
			return nil
		case err != nil:
			ds.note("%s is cut short (%v): only the rows before the error are used", name, err)
		}
		return t
	}
	ds.cells = get("cells.csv", "cell parameters are taken from the other files")
	ds.messages = get("messages.csv", "no delay, delivery or message-based figures")
	ds.conns = get("connections.csv", "no startup latency")
	ds.links = get("links.csv", "no packets per second or bytes per message")
	ds.cpu = get("cpu.csv", "no processor energy")
	ds.compl = get("completions.csv", "completion times are derived from messages.csv where possible")
	return ds, nil
}

// note records a remark for the report; line breaks (error texts carry
// them) are folded so that a note stays one Markdown list item.
func (ds *dataset) note(format string, args ...any) {
	s := strings.Join(strings.Fields(strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", " / ")), " ")
	ds.notes = append(ds.notes, s)
}
