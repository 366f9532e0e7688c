package records

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
)

// A row type is a struct whose exported fields carry a `csv:"NAME"` tag;
// the tags in field order are the file's header. Field kinds: string,
// bool, int, int64 and float64. The tag option ",omitzero" writes a zero
// number as an empty cell (a time that was never taken), and an empty cell
// reads as zero.

type column struct {
	name     string
	index    int
	omitZero bool
}

// columns lists the CSV columns of the row type T.
func columns[T any]() []column {
	var zero T
	rt := reflect.TypeOf(zero)
	var out []column
	for i := range rt.NumField() {
		f := rt.Field(i)
		tag, ok := f.Tag.Lookup("csv")
		if !ok || !f.IsExported() {
			continue
		}
		name, opt, _ := strings.Cut(tag, ",")
		out = append(out, column{name: name, index: i, omitZero: opt == "omitzero"})
	}
	return out
}

// Header returns the header row of the record file whose rows are T.
func Header[T any]() []string {
	cols := columns[T]()
	h := make([]string, len(cols))
	for i, c := range cols {
		h[i] = c.name
	}
	return h
}

// Format returns r as a CSV row in the order of Header[T].
func Format[T any](r T) []string {
	v := reflect.ValueOf(r)
	cols := columns[T]()
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = formatValue(v.Field(c.index), c.omitZero)
	}
	return out
}

func formatValue(f reflect.Value, omitZero bool) string {
	if omitZero && f.IsZero() {
		return ""
	}
	switch f.Kind() {
	case reflect.String:
		return f.String()
	case reflect.Bool:
		return strconv.FormatBool(f.Bool())
	case reflect.Int, reflect.Int64:
		return strconv.FormatInt(f.Int(), 10)
	case reflect.Float64:
		return strconv.FormatFloat(f.Float(), 'f', -1, 64)
	}
	return fmt.Sprint(f.Interface()) // no row type has other kinds (TestRowKinds)
}

// parseValue sets f from a cell; a malformed cell leaves the zero value.
func parseValue(f reflect.Value, s string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(s)
	case reflect.Bool:
		switch strings.ToLower(s) {
		case "1", "true", "yes", "y", "t":
			f.SetBool(true)
		}
	case reflect.Int, reflect.Int64:
		if v, err := strconv.ParseInt(s, 10, 64); err == nil {
			f.SetInt(v)
		} else if x, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(x) && !math.IsInf(x, 0) {
			f.SetInt(int64(x))
		}
	case reflect.Float64:
		x, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
		if err == nil && !math.IsNaN(x) && !math.IsInf(x, 0) {
			f.SetFloat(x)
		}
	}
}

// Writer writes rows of type T to a CSV file that starts with T's header.
type Writer[T any] struct {
	name string
	c    io.Closer // nil for NewWriter
	b    *bufio.Writer
	w    *csv.Writer
}

// NewWriter writes T's header to w and returns a Writer for the rows.
func NewWriter[T any](w io.Writer) (*Writer[T], error) {
	b := bufio.NewWriter(w)
	out := &Writer[T]{name: "records", b: b, w: csv.NewWriter(b)}
	if err := out.w.Write(Header[T]()); err != nil {
		return nil, fmt.Errorf("write header: %w", err)
	}
	return out, nil
}

// Create creates the file path (and its directory) with T's header.
func Create[T any](path string) (*Writer[T], error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	w, err := NewWriter[T](f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	w.name, w.c = path, f
	return w, nil
}

// Write adds one row.
func (w *Writer[T]) Write(r T) error {
	if err := w.w.Write(Format(r)); err != nil {
		return fmt.Errorf("write %s: %w", w.name, err)
	}
	return nil
}

// Flush writes the buffered rows out.
func (w *Writer[T]) Flush() error {
	w.w.Flush()
	if err := w.w.Error(); err != nil {
		return fmt.Errorf("write %s: %w", w.name, err)
	}
	if err := w.b.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", w.name, err)
	}
	return nil
}

// Close flushes the rows and closes the file Create opened. A nil Writer
// closes without error.
func (w *Writer[T]) Close() error {
	if w == nil {
		return nil
	}
	err := w.Flush()
	if w.c != nil {
		if cerr := w.c.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close %s: %w", w.name, cerr)
		}
	}
	return err
}

// ErrNoHeader is returned for a record file without a header row.
var ErrNoHeader = errors.New("empty file, want a header row")

// Read reads rows of type T by column name: columns T does not know are
// ignored, columns the file lacks read as zero. On a malformed line Read
// returns the rows before it together with the error. Header reports the
// file's columns.
func Read[T any](r io.Reader) (rows []T, header []string, err error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	header, err = cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, nil, ErrNoHeader
	}
	if err != nil {
		return nil, nil, err
	}
	pos := map[string]int{}
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		header[i] = h
		if _, dup := pos[h]; !dup {
			pos[h] = i
		}
	}
	type slot struct{ field, col int }
	var slots []slot
	for _, c := range columns[T]() {
		if i, ok := pos[c.name]; ok {
			slots = append(slots, slot{c.index, i})
		}
	}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return rows, header, nil
		}
		if err != nil {
			return rows, header, err
		}
		var row T
		v := reflect.ValueOf(&row).Elem()
		for _, s := range slots {
			if s.col < len(rec) {
				parseValue(v.Field(s.field), rec[s.col])
			}
		}
		rows = append(rows, row)
	}
}

// ReadFile reads a record file with Read. A missing file returns an error
// that wraps fs.ErrNotExist; other errors name the file.
func ReadFile[T any](path string) ([]T, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	rows, h, err := Read[T](bufio.NewReader(f))
	if err != nil {
		return rows, h, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return rows, h, nil
}
