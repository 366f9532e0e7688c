package yamlconf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
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
	// Document names one document for the message about a document that
	// is not a mapping, e.g. "a scenario"; default "the configuration".
	Document string
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
	// ValidateDecoded runs Validate only when the document decoded
	// without a problem: for checks of the whole value, whose problems
	// would be consequences of what could not be decoded (the decoder
	// drops a list item it cannot read, so a name defined there looks
	// undefined).
	ValidateDecoded bool
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
		return syntaxError(name, err).err
	}
	if empty(&root) {
		return nil // empty file: all defaults
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	validate := opts.Validate
	if vv, ok := v.(validator); ok && validate == nil {
		validate = vv.Validate
	}
	return joinByLine(check(name, &root, v, dec.Decode(v), validate, opts))
}

// empty tells whether doc, a document node, holds nothing: no content (a
// file of comments) or the null of an empty "---" document.
func empty(doc *yaml.Node) bool {
	if len(doc.Content) == 0 {
		return true
	}
	c := doc.Content[0]
	return c.Kind == yaml.ScalarNode && c.ShortTag() == "!!null" && c.Value == ""
}

// parserProblems are the messages of the YAML parser proper (not its
// scanner's): the decoder gives their line counted from 0, the line where
// the unfinished list, mapping or node starts (it adds 1 for the
// scanner's only), and no line when that is the first.
var parserProblems = []string{
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected '-' indicator",
	"did not find expected key",
	"did not find expected node content",
	"found undefined tag handle",
}

// syntaxError places an error of the YAML parser at its line.
func syntaxError(name string, err error) lineError {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLineRe.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	if slices.Contains(parserProblems, msg) {
		line++
	}
	if line == 0 {
		return lineError{err: fmt.Errorf("%s: not valid YAML: %s", name, msg)}
	}
	return lineError{line: line, err: fmt.Errorf("%s:%d: not valid YAML: %s", name, line, msg)}
}

// check lists the problems of one document: doc is its node (a document
// node that is not empty), derr what decoding it into v gave, validate
// (may be nil) what checks v then.
func check(name string, doc *yaml.Node, v any, derr error, validate func() error, opts Options) []lineError {
	if top := doc.Content[0]; top.Kind != yaml.MappingNode {
		keys := ""
		if opts.TopKeys != "" {
			keys = " (" + opts.TopKeys + ")"
		}
		what := opts.Document
		if what == "" {
			what = "the configuration"
		}
		return []lineError{{line: top.Line, err: fmt.Errorf("%s:%d: %s must be a mapping of keys%s, got %s", name, top.Line, what, keys, kindName(top))}}
	}
	idx := NewIndex(doc)
	t := reflect.TypeOf(v)
	var errs []lineError
	if derr != nil && !errors.Is(derr, io.EOF) {
		var te *yaml.TypeError
		if !errors.As(derr, &te) {
			// An UnmarshalYAML or UnmarshalText method's plain error stops
			// the decoder half-way: validating the half-filled value would
			// report problems that are not there.
			return []lineError{explain(name, strings.TrimPrefix(derr.Error(), "yaml: "), idx, t, opts.Expect)}
		}
		for _, e := range te.Errors {
			errs = append(errs, explain(name, e, idx, t, opts.Expect))
		}
	}
	if validate != nil && (len(errs) == 0 || !opts.ValidateDecoded) {
		if err := validate(); err != nil {
			for _, e := range unjoin(err) {
				var fe *FieldError
				if errors.As(e, &fe) {
					if line := idx.Line(fe.Path); line > 0 {
						if undecoded(errs, fe.Path) {
							continue
						}
						errs = append(errs, lineError{line: line, err: fmt.Errorf("%s:%d: %w", name, line, e)})
						continue
					}
				}
				errs = append(errs, lineError{err: fmt.Errorf("%s: %w", name, e)})
			}
		}
	}
	return errs
}

// undecoded tells whether path is, or is inside, a value that errs say
// could not be decoded: Validate saw its zero value, not what the file
// says, so its problem with it is not reported.
func undecoded(errs []lineError, path string) bool {
	for _, e := range errs {
		if v := e.value; v != "" && (path == v || strings.HasPrefix(path, v+".") || strings.HasPrefix(path, v+"[")) {
			return true
		}
	}
	return false
}

// joinByLine joins errs ordered by line (those without one first), or
// returns nil.
func joinByLine(errs []lineError) error {
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
	// value is the key path of a value that could not be decoded, or "".
	value string
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
	yamlLineRe    = regexp.MustCompile(`(?s)^line (\d+): (.*)$`)
	yamlColumnRe  = regexp.MustCompile(`(?s)^column (\d+): (.*)$`)
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
	if c := yamlColumnRe.FindStringSubmatch(msg); c != nil { // from ValueError
		col, _ := strconv.Atoi(c[1])
		path := idx.valueAt(line, col)
		return lineError{line, fmt.Errorf("%s:%d: %s: %s", name, line, path, c[2]), path}
	}
	if u := yamlUnknownRe.FindStringSubmatch(msg); u != nil {
		path := idx.keyPath(line, u[1])
		parent := ""
		if i := strings.LastIndex(path, "."); i >= 0 {
			parent = path[:i]
		}
		keys := strings.Join(KeysAt(t, parent), ", ")
		return lineError{line: line, err: fmt.Errorf("%s:%d: %s: unknown key; expected one of: %s", name, line, path, keys)}
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
		return lineError{line, fmt.Errorf("%s:%d: %s: got %s; expected %s", name, line, path, got, expected(tm[3], t, expect)), path}
	}
	return lineError{line: line, err: fmt.Errorf("%s:%d: %s: %s", name, line, idx.Path(line), msg)}
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
	if e, ok := strings.CutPrefix(goType, "[]"); ok {
		return "a list, each " + expected(e, t, expect)
	}
	if e, ok := strings.CutPrefix(goType, "map[string]"); ok {
		return "a mapping of names, each to " + expected(e, t, expect)
	}
	if e, ok := strings.CutPrefix(goType, "*"); ok {
		return expected(e, t, expect)
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
// "routes[0]", "profiles.slow"; "" for the top) inside t, or nil where the
// path does not lead to a struct. The keys of an inlined struct
// (`yaml:",inline"`) are its parent's.
func KeysAt(t reflect.Type, path string) []string {
	if path != "" {
		if t = typeAt(t, path); t == nil {
			return nil
		}
	}
	if t = elem(t); t.Kind() != reflect.Struct {
		return nil
	}
	return structKeys(t)
}

func structKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		if inlined(f) {
			keys = append(keys, structKeys(f.Type)...)
			continue
		}
		if k := yamlName(f); k != "" && k != "-" {
			keys = append(keys, k)
		}
	}
	return keys
}

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return name
}

// inlined tells whether f is a struct whose keys the YAML decoder reads
// as its parent's.
func inlined(f reflect.StructField) bool {
	_, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return f.Type.Kind() == reflect.Struct && slices.Contains(strings.Split(opts, ","), "inline")
}

func fieldByYAML(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if inlined(f) {
			if g, ok := fieldByYAML(f.Type, key); ok {
				return g, true
			}
			continue
		}
		if yamlName(f) == key {
			return f, true
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
