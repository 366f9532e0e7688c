package yamlconf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// FieldError is one problem with one value. Path names the value as in the
// file ("listen[1]", "quic.idle_timeout"); Decode adds file and line.
type FieldError struct {
	Path string
	Msg  string
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Msg }

// Options tune Decode's checks and messages.
type Options struct {
	// TopKeys is a sample of the top-level keys for the message about a
	// document that is not a mapping, e.g. "listen:, state_dir:, ...".
	TopKeys string
	// Expect describes Go types (as the YAML decoder names them, e.g.
	// "[]string") in "got X; expected Y", over the built-in descriptions.
	Expect map[string]string
	// Validate, when set, runs after decoding (also when decoding found
	// problems, so that all are reported at once); when not set, the
	// Validate() error method of the value decoded into runs, if it has
	// one. The *FieldError values in what it returns (one error or an
	// errors.Join) are placed at the line of their Path, or of its nearest
	// ancestor in the file.
	Validate func() error
}

// validator is a configuration that checks its own values.
type validator interface{ Validate() error }

// Load reads the file at path and decodes it into a new T (Parse).
func Load[T any](path string, opts Options) (T, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("config: %w", err)
	}
	return Parse[T](path, b, opts)
}

// Parse decodes data, labelled name in errors, into a new T (Decode); on
// error it returns the zero T.
func Parse[T any](name string, data []byte, opts Options) (T, error) {
	var v T
	if err := Decode(name, data, &v, opts); err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// Decode decodes data, a YAML document labelled name in errors, into v (a
// pointer to a struct). Keys that v does not have are errors. An empty
// document leaves v as it is and is not validated. Every problem is
// reported in one error (errors.Join, ordered by line), each as
// "NAME:LINE: KEY: problem"; those from Options.Validate wrap its
// *FieldError.
func Decode(name string, data []byte, v any, opts Options) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return fmt.Errorf("%s: %s", name, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(root.Content) == 0 {
		return nil // empty file: all defaults
	}
	if doc := root.Content[0]; doc.Kind != yaml.MappingNode {
		keys := ""
		if opts.TopKeys != "" {
			keys = " (" + opts.TopKeys + ")"
		}
		return fmt.Errorf("%s:%d: the configuration must be a mapping of keys%s, got %s", name, doc.Line, keys, kindName(doc))
	}
	idx := NewIndex(&root)
	t := reflect.TypeOf(v)
	var errs []lineError
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			for _, e := range te.Errors {
				errs = append(errs, explain(name, e, idx, t, opts.Expect))
			}
		} else {
			errs = append(errs, lineError{err: fmt.Errorf("%s: %s", name, strings.TrimPrefix(err.Error(), "yaml: "))})
		}
	}
	validate := opts.Validate
	if vv, ok := v.(validator); ok && validate == nil {
		validate = vv.Validate
	}
	if validate != nil {
		if err := validate(); err != nil {
			for _, e := range unjoin(err) {
				var fe *FieldError
				if errors.As(e, &fe) {
					if line := idx.Line(fe.Path); line > 0 {
						errs = append(errs, lineError{line, fmt.Errorf("%s:%d: %w", name, line, e)})
						continue
					}
				}
				errs = append(errs, lineError{err: fmt.Errorf("%s: %w", name, e)})
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].line < errs[j].line })
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e.err
	}
	return errors.Join(out...)
}

// lineError is one problem and the line it is at (0: none).
type lineError struct {
	line int
	err  error
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
		return fmt.Sprintf("the value %q", n.Value)
	}
	return "something else"
}

var (
	yamlLineRe    = regexp.MustCompile(`^line (\d+): (.*)$`)
	yamlUnknownRe = regexp.MustCompile(`^field (\S+) not found in type (\S+)$`)
	yamlTypeRe    = regexp.MustCompile("^cannot unmarshal (!!\\w+)(?: `(.*)`)? into (.+)$")
)

// explain turns one yaml.TypeError line into "NAME:LINE: KEY: problem;
// expected ...". t is the type decoded into.
func explain(name, e string, idx *Index, t reflect.Type, expect map[string]string) lineError {
	m := yamlLineRe.FindStringSubmatch(e)
	if m == nil {
		return lineError{err: fmt.Errorf("%s: %s", name, e)}
	}
	line, _ := strconv.Atoi(m[1])
	msg := m[2]
	if u := yamlUnknownRe.FindStringSubmatch(msg); u != nil {
		path := idx.keyPath(line, u[1])
		parent := ""
		if i := strings.LastIndex(path, "."); i >= 0 {
			parent = path[:i]
		}
		keys := strings.Join(KeysAt(t, parent), ", ")
		return lineError{line, fmt.Errorf("%s:%d: %s: unknown key; expected one of: %s", name, line, path, keys)}
	}
	if tm := yamlTypeRe.FindStringSubmatch(msg); tm != nil {
		path := idx.valuePath(line, tm[1], tm[2], func(p string) bool {
			ft := typeAt(t, p)
			return ft != nil && (ft.String() == tm[3] || "*"+ft.String() == tm[3] || ft.Kind() == reflect.Pointer && ft.Elem().String() == tm[3])
		})
		got := tm[2]
		if got == "" {
			got = map[string]string{"!!seq": "a list", "!!map": "a mapping"}[tm[1]]
		} else {
			got = strconv.Quote(got)
		}
		return lineError{line, fmt.Errorf("%s:%d: %s: got %s; expected %s", name, line, path, got, expected(tm[3], t, expect))}
	}
	return lineError{line, fmt.Errorf("%s:%d: %s: %s", name, line, idx.Path(line), msg)}
}

// expected describes a Go type, as the YAML decoder names it, to a person
// writing the file.
func expected(goType string, t reflect.Type, expect map[string]string) string {
	if s, ok := expect[goType]; ok {
		return s
	}
	switch goType {
	case "time.Duration":
		return "a duration such as 500ms, 20s or 2m"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "a whole number"
	case "float32", "float64":
		return "a number"
	case "bool", "*bool":
		return "true or false"
	case "string":
		return "a string"
	case "[]string":
		return "a list of strings"
	}
	if structTypes(t)[strings.TrimPrefix(goType, "*")] {
		return "a mapping of keys"
	}
	return "a value of type " + goType
}

// structTypes names every struct type reachable through the fields of t.
func structTypes(t reflect.Type) map[string]bool {
	seen := map[string]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		t = elem(t)
		if t.Kind() != reflect.Struct || seen[t.String()] {
			return
		}
		seen[t.String()] = true
		for i := range t.NumField() {
			walk(t.Field(i).Type)
		}
	}
	walk(t)
	return seen
}

// elem strips pointers, slices, arrays and maps down to the element type.
func elem(t reflect.Type) reflect.Type {
	for {
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			t = t.Elem()
		default:
			return t
		}
	}
}

// typeAt returns the Go type of the value at the key path inside t, or nil.
func typeAt(t reflect.Type, path string) reflect.Type {
	for _, part := range strings.Split(path, ".") {
		key, rest, _ := strings.Cut(part, "[")
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Struct:
			f, ok := fieldByYAML(t, key)
			if !ok {
				return nil
			}
			t = f.Type
		case reflect.Map:
			t = t.Elem()
		default:
			return nil
		}
		for ; rest != ""; _, rest, _ = strings.Cut(rest, "[") {
			for t.Kind() == reflect.Pointer {
				t = t.Elem()
			}
			if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
				return nil
			}
			t = t.Elem()
		}
	}
	return t
}

// KeysAt lists the yaml keys of the struct at the key path ("quic",
// "routes[0]"; "" for the top) inside t, or nil where the path does not
// lead to a struct.
func KeysAt(t reflect.Type, path string) []string {
	t = elem(t)
	if path != "" {
		for _, part := range strings.Split(path, ".") {
			if i := strings.IndexByte(part, '['); i >= 0 {
				part = part[:i]
			}
			if t.Kind() != reflect.Struct {
				return nil
			}
			f, ok := fieldByYAML(t, part)
			if !ok {
				return nil
			}
			t = elem(f.Type)
		}
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var keys []string
	for i := range t.NumField() {
		if k := yamlName(t.Field(i)); k != "" && k != "-" {
			keys = append(keys, k)
		}
	}
	return keys
}

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return name
}

func fieldByYAML(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if yamlName(t.Field(i)) == key {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

// Marshal renders v as YAML with two-space indentation: the configuration
// file format that Decode reads back.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("config: encode: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: encode: %w", err)
	}
	return buf.Bytes(), nil
}
