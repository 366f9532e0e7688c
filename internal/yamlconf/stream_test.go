package yamlconf

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// size is a value with its own words ("3k"), refused through ValueError.
type size int

func (s *size) UnmarshalYAML(n *yaml.Node) error {
	var v int
	if _, err := fmt.Sscanf(n.Value, "%dk", &v); err != nil || v < 0 {
		return ValueError(n, fmt.Errorf("size %q: write a whole number of kilobytes such as 3k", n.Value))
	}
	*s = size(v * 1000)
	return nil
}

// named is a name or a mapping of keys, decoded by hand (CheckKeys).
type named struct {
	Name string `yaml:"name"`
	Tags []int  `yaml:"tags"`
}

type namedFields named

func (n *named) UnmarshalYAML(v *yaml.Node) error {
	if v.Kind == yaml.ScalarNode {
		n.Name = v.Value
		return nil
	}
	if err := CheckKeys(v, n); err != nil {
		return err
	}
	return v.Decode((*namedFields)(n))
}

// common is inlined into item: its keys are item's.
type common struct {
	Max  int  `yaml:"max"`
	Size size `yaml:"size"`
}

type item struct {
	ID     string `yaml:"id"`
	common `yaml:",inline"`
	Under  *common `yaml:"under"`
}

type sheet struct {
	Name   string            `yaml:"name"`
	Count  int               `yaml:"count"`
	Items  []item            `yaml:"items"`
	Byname map[string]common `yaml:"byname"`
	Nodes  []named           `yaml:"nodes"`
	Sizes  []size            `yaml:"sizes"`
}

func (d sheet) Validate() error {
	var errs []error
	if d.Name == "" {
		errs = append(errs, &FieldError{Path: "name", Msg: "missing"})
	}
	for i, it := range d.Items {
		if it.Max <= 0 {
			errs = append(errs, &FieldError{Path: fmt.Sprintf("items[%d].max", i), Msg: "must be positive"})
		}
	}
	for i, s := range d.Sizes {
		if s == 0 {
			errs = append(errs, &FieldError{Path: fmt.Sprintf("sizes[%d]", i), Msg: "must not be zero"})
		}
	}
	return errors.Join(errs...)
}

// TestParseAllDocuments: every document decoded in order, empty ones
// skipped, lines counted from the start of the stream, each document's
// Validate run, every problem of every document reported at once.
func TestParseAllDocuments(t *testing.T) {
	docs, err := ParseAll[sheet]("s.yaml", []byte("# first\nname: a\ncount: 1\n---\n---\n# only a comment\n---\nname: b\nsizes: [2k]\n"), Options{})
	if err != nil || len(docs) != 2 || docs[0].Name != "a" || docs[0].Count != 1 || docs[1].Name != "b" || docs[1].Sizes[0] != 2000 {
		t.Fatalf("%+v %v", docs, err)
	}
	if docs, err := ParseAll[sheet]("s.yaml", nil, Options{}); err != nil || len(docs) != 0 {
		t.Fatalf("empty stream: %+v %v", docs, err)
	}
	_, err = ParseAll[sheet]("s.yaml", []byte("name: a\ncount: many\n---\ncount: 2\n---\nname: c\ncolour: red\n"), Options{})
	// Problems without a line come first.
	want := strings.Join([]string{
		`s.yaml: name: missing`,
		`s.yaml:2: count: got "many"; expected a whole number`,
		`s.yaml:7: colour: unknown key; expected one of: name, count, items, byname, nodes, sizes`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
}

// TestParseAllSyntaxAndShape: a syntax error in a later document is placed
// at its line in the stream; a document that is not a mapping is named
// with Options.Document.
func TestParseAllSyntaxAndShape(t *testing.T) {
	_, err := ParseAll[sheet]("s.yaml", []byte("name: a\n---\nname: b\n  count: 1\n"), Options{})
	if err == nil || !regexp.MustCompile(`^s\.yaml:4: not valid YAML: \S`).MatchString(err.Error()) {
		t.Fatalf("syntax error: %v", err)
	}
	_, err = ParseAll[sheet]("s.yaml", []byte("name: a\n---\n- name: b\n"), Options{Document: "a thing", TopKeys: "name:, ..."})
	if err == nil || err.Error() != "s.yaml:3: a thing must be a mapping of keys (name:, ...), got a list" {
		t.Fatalf("not a mapping: %v", err)
	}
}

// TestValueErrorsPlacedAndDecodingGoesOn: an UnmarshalYAML method's
// ValueError is placed at its value's key path (several values on one
// line told apart by column) and decoding goes on after it.
func TestValueErrorsPlacedAndDecodingGoesOn(t *testing.T) {
	var d sheet
	err := Decode("d.yaml", []byte("name: x\nsizes: [0k, 2q]\nitems:\n  - {id: a, size: big, max: 1}\ncount: lots\n"), &d, Options{})
	want := strings.Join([]string{
		`d.yaml:2: sizes[1]: size "2q": write a whole number of kilobytes such as 3k`,
		`d.yaml:2: sizes[0]: must not be zero`,
		`d.yaml:4: items[0].size: size "big": write a whole number of kilobytes such as 3k`,
		`d.yaml:5: count: got "lots"; expected a whole number`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
	if d.Items[0].Max != 1 {
		t.Errorf("decoding stopped at the first bad value: %+v", d.Items)
	}
}

// TestInlineMapAndHandDecodedKeys: unknown keys list an inlined struct's
// keys as its parent's, find the struct under a mapping of names, and
// are found by CheckKeys in a mapping an UnmarshalYAML method decodes.
// Validate's problem with a value that could not be decoded (items[1].max,
// a zero to it) is not reported; the one with a value left out is.
func TestInlineMapAndHandDecodedKeys(t *testing.T) {
	var d sheet
	err := Decode("d.yaml", []byte(`name: x
items:
  - {id: a, mx: 1, under: {max: 2, sise: 3k}}
  - {id: b, max: many}
byname:
  one: {max: 1, min: 0}
nodes: [n1, {name: n2, tag: [1]}, {name: n3, tags: lots}]
`), &d, Options{})
	want := strings.Join([]string{
		`d.yaml:3: items[0].mx: unknown key; expected one of: id, max, size, under`,
		`d.yaml:3: items[0].under.sise: unknown key; expected one of: max, size`,
		`d.yaml:3: items[0].max: must be positive`,
		`d.yaml:4: items[1].max: got "many"; expected a whole number`,
		`d.yaml:6: byname.one.min: unknown key; expected one of: max, size`,
		`d.yaml:7: nodes[1].tag: unknown key; expected one of: name, tags`,
		`d.yaml:7: nodes[2].tags: got "lots"; expected a list, each a whole number`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
	if got := KeysAt(reflect.TypeOf(d), "items[0].under"); !reflect.DeepEqual(got, []string{"max", "size"}) {
		t.Errorf("KeysAt under: %v", got)
	}
	if got := KeysAt(reflect.TypeOf(d), "byname.one"); !reflect.DeepEqual(got, []string{"max", "size"}) {
		t.Errorf("KeysAt byname.one: %v", got)
	}
}

// TestSyntaxErrorNamesTheLine: Decode places the parser's error at its
// line too: for an unfinished list, the line where it starts (the YAML
// decoder counts that one from 0).
func TestSyntaxErrorNamesTheLine(t *testing.T) {
	var d sheet
	err := Decode("d.yaml", []byte("name: x\ncount: 1\nitems: [a\nsizes: []\n"), &d, Options{})
	if err == nil || err.Error() != `d.yaml:3: not valid YAML: did not find expected ',' or ']'` {
		t.Fatalf("err = %v", err)
	}
}

// TestValidateDecoded: with Options.ValidateDecoded, Validate runs only on
// a document that decoded without a problem.
func TestValidateDecoded(t *testing.T) {
	var d sheet
	ran := false
	opts := Options{ValidateDecoded: true, Validate: func() error { ran = true; return &FieldError{Path: "name", Msg: "refused"} }}
	err := Decode("d.yaml", []byte("name: x\ncount: lots\n"), &d, opts)
	if ran || err == nil || err.Error() != `d.yaml:2: count: got "lots"; expected a whole number` {
		t.Fatalf("ran %v, err %v", ran, err)
	}
	err = Decode("d.yaml", []byte("name: x\ncount: 3\n"), &d, opts)
	if !ran || err == nil || err.Error() != "d.yaml:1: name: refused" {
		t.Fatalf("ran %v, err %v", ran, err)
	}
}
