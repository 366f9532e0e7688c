package broker

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

// LoadConfig reads a YAML configuration file into Options (the file's keys
// are the yaml names of Options' fields; see docs/broker.md). Unknown keys,
// wrong types and invalid values are all reported at once, each as
// "FILE:LINE: KEY: problem; expected ...".
func LoadConfig(path string) (Options, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Options{}, fmt.Errorf("config: %w", err)
	}
	return ParseConfig(path, b)
}

// ParseConfig is LoadConfig on bytes; name labels the errors.
func ParseConfig(name string, data []byte) (Options, error) {
	var o Options
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return Options{}, fmt.Errorf("%s: %s", name, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(root.Content) == 0 {
		return o, nil // empty file: all defaults
	}
	idx := newNodeIndex(&root)
	if doc := root.Content[0]; doc.Kind != yaml.MappingNode {
		return Options{}, fmt.Errorf("%s:%d: the configuration must be a mapping of keys (listen:, state_dir:, ...), got %s", name, doc.Line, kindName(doc))
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var errs []error
	if err := dec.Decode(&o); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			for _, e := range te.Errors {
				errs = append(errs, idx.explain(name, e))
			}
		} else {
			errs = append(errs, fmt.Errorf("%s: %s", name, strings.TrimPrefix(err.Error(), "yaml: ")))
		}
	}
	if err := o.Validate(); err != nil {
		for _, e := range unjoin(err) {
			var fe *FieldError
			if errors.As(e, &fe) {
				line := idx.lineOf(fe.Path)
				if line > 0 {
					errs = append(errs, fmt.Errorf("%s:%d: %s: %s", name, line, fe.Path, fe.Msg))
					continue
				}
				errs = append(errs, fmt.Errorf("%s: %s: %s", name, fe.Path, fe.Msg))
				continue
			}
			errs = append(errs, fmt.Errorf("%s: %w", name, e))
		}
	}
	if len(errs) > 0 {
		sort.SliceStable(errs, func(i, j int) bool { return errLine(errs[i]) < errLine(errs[j]) })
		return Options{}, errors.Join(errs...)
	}
	return o, nil
}

// MarshalConfig renders o as YAML in the configuration file format.
func MarshalConfig(o Options) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(o); err != nil {
		return nil, fmt.Errorf("config: encode: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: encode: %w", err)
	}
	return buf.Bytes(), nil
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

var lineRe = regexp.MustCompile(`^[^:]*:(\d+):`)

func errLine(err error) int {
	m := lineRe.FindStringSubmatch(err.Error())
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
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

// nodeIndex maps configuration paths ("quic.idle_timeout", "listen[1]") to
// lines and back.
type nodeIndex struct {
	pathLine map[string]int
	linePath map[int]string
}

func newNodeIndex(root *yaml.Node) *nodeIndex {
	idx := &nodeIndex{pathLine: map[string]int{}, linePath: map[int]string{}}
	if len(root.Content) > 0 {
		idx.walk(root.Content[0], "")
	}
	return idx
}

func (x *nodeIndex) set(path string, line int) {
	if _, ok := x.pathLine[path]; !ok {
		x.pathLine[path] = line
	}
	if _, ok := x.linePath[line]; !ok || len(path) > len(x.linePath[line]) {
		x.linePath[line] = path
	}
}

func (x *nodeIndex) walk(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			x.set(p, k.Line)
			x.walk(v, p)
		}
	case yaml.SequenceNode:
		for i, v := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			x.set(p, v.Line)
			x.walk(v, p)
		}
	}
}

// lineOf returns the line of path, or of its nearest ancestor present in the
// file, or 0.
func (x *nodeIndex) lineOf(path string) int {
	for p := path; p != ""; {
		if l, ok := x.pathLine[p]; ok {
			return l
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0
}

var (
	yamlLineRe    = regexp.MustCompile(`^line (\d+): (.*)$`)
	yamlUnknownRe = regexp.MustCompile(`^field (\S+) not found in type (\S+)$`)
	yamlTypeRe    = regexp.MustCompile("^cannot unmarshal (!!\\w+)(?: `(.*)`)? into (.+)$")
)

// explain turns one yaml.TypeError line into "FILE:LINE: KEY: problem;
// expected ...".
func (x *nodeIndex) explain(name, e string) error {
	m := yamlLineRe.FindStringSubmatch(e)
	if m == nil {
		return fmt.Errorf("%s: %s", name, e)
	}
	line, _ := strconv.Atoi(m[1])
	msg := m[2]
	path := x.linePath[line]
	if u := yamlUnknownRe.FindStringSubmatch(msg); u != nil {
		parent := ""
		if i := strings.LastIndex(path, "."); i >= 0 {
			parent = path[:i]
		}
		keys := keysAt(parent)
		return fmt.Errorf("%s:%d: %s: unknown key; expected one of: %s", name, line, path, strings.Join(keys, ", "))
	}
	if tm := yamlTypeRe.FindStringSubmatch(msg); tm != nil {
		got := tm[2]
		if got == "" {
			got = map[string]string{"!!seq": "a list", "!!map": "a mapping"}[tm[1]]
		} else {
			got = strconv.Quote(got)
		}
		return fmt.Errorf("%s:%d: %s: got %s; expected %s", name, line, path, got, expectedFor(tm[3]))
	}
	return fmt.Errorf("%s:%d: %s: %s", name, line, path, msg)
}

func expectedFor(goType string) string {
	switch goType {
	case "time.Duration":
		return "a duration such as 500ms, 20s or 2m"
	case "int", "int64", "uint16", "uint32":
		return "a whole number"
	case "bool", "*bool":
		return "true or false"
	case "string":
		return "a string"
	case "[]string":
		return "a list of strings, e.g. [mqtt://0.0.0.0:1883, quic://0.0.0.0:14567]"
	}
	if strings.HasPrefix(goType, "broker.") {
		return "a mapping of keys"
	}
	return "a value of type " + goType
}

// keysAt lists the yaml keys of the Options struct at the dotted path.
func keysAt(path string) []string {
	t := reflect.TypeFor[Options]()
	if path != "" {
		for _, part := range strings.Split(path, ".") {
			if i := strings.IndexByte(part, '['); i >= 0 {
				part = part[:i]
			}
			f, ok := fieldByYAML(t, part)
			if !ok || f.Type.Kind() != reflect.Struct {
				return nil
			}
			t = f.Type
		}
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
	tag := f.Tag.Get("yaml")
	name, _, _ := strings.Cut(tag, ",")
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
