package yamlconf

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

type limits struct {
	Max     int           `yaml:"max"`
	Timeout time.Duration `yaml:"timeout"`
}

type route struct {
	Listen    string   `yaml:"listen"`
	Upstreams []string `yaml:"upstreams"`
}

type config struct {
	Name   string  `yaml:"name"`
	On     *bool   `yaml:"on"`
	Limits limits  `yaml:"limits"`
	Routes []route `yaml:"routes"`
	Skip   string  `yaml:"-"`
}

func (c config) validate() error {
	var errs []error
	if c.Name == "bad" {
		errs = append(errs, &FieldError{Path: "name", Msg: "bad name; want good"})
	}
	for i, r := range c.Routes {
		if r.Listen == "" {
			errs = append(errs, &FieldError{Path: fmt.Sprintf("routes[%d].listen", i), Msg: "empty"})
		}
	}
	if c.Limits.Max < 0 {
		errs = append(errs, &FieldError{Path: "limits.max", Msg: "negative"})
	}
	errs = append(errs, nil)
	return errors.Join(errs...)
}

func decode(t *testing.T, src string) (config, error) {
	t.Helper()
	var c config
	err := Decode("c.yaml", []byte(src), &c, Options{TopKeys: "name:, routes:, ...", Validate: func() error { return c.validate() }})
	return c, err
}

func TestDecodeGood(t *testing.T) {
	c, err := decode(t, "name: x\non: false\nlimits: {max: 3, timeout: 2s}\nroutes:\n  - listen: a\n    upstreams: [b, c]\n")
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "x" || c.On == nil || *c.On || c.Limits.Max != 3 || c.Limits.Timeout != 2*time.Second || len(c.Routes[0].Upstreams) != 2 {
		t.Fatalf("%+v", c)
	}
}

func TestDecodeEmptyIsDefaults(t *testing.T) {
	c, err := decode(t, "# nothing\n")
	if err != nil || !reflect.DeepEqual(c, config{}) {
		t.Fatalf("%+v %v", c, err)
	}
}

func TestDecodeReportsEveryProblemByLine(t *testing.T) {
	_, err := decode(t, `name: bad
limits:
  max: lots
  colour: blue
routes:
  - listen: a
  - upstreams: [x]
    upstream: y
  - listen: b
    upstreams:
      a: b
`)
	if err == nil {
		t.Fatal("no error")
	}
	want := []string{
		"c.yaml:1: name: bad name; want good",
		`c.yaml:3: limits.max: got "lots"; expected a whole number`,
		"c.yaml:4: limits.colour: unknown key; expected one of: max, timeout",
		"c.yaml:7: routes[1].listen: empty",
		"c.yaml:8: routes[1].upstream: unknown key; expected one of: listen, upstreams",
		"c.yaml:11: routes[2].upstreams: got a mapping; expected a list of strings",
	}
	if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%s\nwant\n%s", err, strings.Join(want, "\n"))
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Path != "name" {
		t.Fatalf("errors.As FieldError: %v", fe)
	}
}

func TestDecodeTypeHints(t *testing.T) {
	var c config
	err := Decode("c.yaml", []byte("limits: 5\nroutes:\n  - upstreams:\n      - [1]\non: maybe\n"), &c,
		Options{Expect: map[string]string{"string": "a URL such as tcp://h:1"}})
	for _, w := range []string{
		`c.yaml:1: limits: got "5"; expected a mapping of keys`,
		`c.yaml:4: routes[0].upstreams[0]: got a list; expected a URL such as tcp://h:1`,
		`c.yaml:5: on: got "maybe"; expected true or false`,
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
}

// Several keys on one line: the path is the one whose value and Go type
// fit the problem.
func TestDecodeOneLineManyKeys(t *testing.T) {
	var c config
	err := Decode("c.yaml", []byte("limits: {max: soon, timeout: 1s, colour: red}\nname:\n  - [1]\nroutes: [{listen: [a], upstreams: [b]}]\n"), &c, Options{})
	want := strings.Join([]string{
		`c.yaml:1: limits.max: got "soon"; expected a whole number`,
		`c.yaml:1: limits.colour: unknown key; expected one of: max, timeout`,
		`c.yaml:3: name: got a list; expected a string`,
		`c.yaml:4: routes[0].listen: got a list; expected a string`,
	}, "\n")
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
}

func TestDecodeNotAMappingAndSyntax(t *testing.T) {
	_, err := decode(t, "- a\n- b\n")
	if err == nil || err.Error() != "c.yaml:1: the configuration must be a mapping of keys (name:, routes:, ...), got a list" {
		t.Fatalf("err = %v", err)
	}
	_, err = decode(t, "name: [a\n")
	if err == nil || !strings.HasPrefix(err.Error(), "c.yaml:") || strings.Contains(err.Error(), ": yaml: ") {
		t.Fatalf("err = %v", err)
	}
}

func TestIndexLineFallsBackToAncestor(t *testing.T) {
	var c config
	err := Decode("c.yaml", []byte("x: 1\n"), &c, Options{})
	if err == nil || !strings.Contains(err.Error(), "c.yaml:1: x: unknown key; expected one of: name, on, limits, routes") {
		t.Fatalf("err = %v", err)
	}
	err = Decode("c.yaml", []byte("name: a\nroutes:\n  - listen: a\n"), &c, Options{Validate: func() error {
		return errors.Join(&FieldError{Path: "routes[0].upstreams", Msg: "none"}, &FieldError{Path: "tls", Msg: "missing"}, errors.New("plain"))
	}})
	want := "c.yaml: tls: missing\nc.yaml: plain\nc.yaml:3: routes[0].upstreams: none"
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte("name: x\nroutes: [{listen: a}]\n"))
	f.Add([]byte("limits: {max: -1}\n"))
	f.Add([]byte("- x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var c config
		if err := Decode("f.yaml", b, &c, Options{Validate: func() error { return c.validate() }}); err == nil {
			if verr := c.validate(); verr != nil {
				t.Fatalf("accepted document fails validate: %v", verr)
			}
		}
	})
}

// selfChecked validates itself: Decode runs its Validate method.
type selfChecked struct {
	Port int `yaml:"port"`
}

func (s selfChecked) Validate() error {
	if s.Port <= 0 {
		return &FieldError{Path: "port", Msg: "want 1 to 65535"}
	}
	return nil
}

func TestLoadParseRunValidateMethod(t *testing.T) {
	path := t.TempDir() + "/s.yaml"
	if err := os.WriteFile(path, []byte("port: 0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Load[selfChecked](path, Options{})
	if err == nil || err.Error() != path+":1: port: want 1 to 65535" || s != (selfChecked{}) {
		t.Fatalf("Load: %+v %v", s, err)
	}
	if s, err := Parse[selfChecked]("s", []byte("port: 80\n"), Options{}); err != nil || s.Port != 80 {
		t.Fatalf("Parse: %+v %v", s, err)
	}
	if _, err := Load[selfChecked](path+".missing", Options{}); err == nil || !strings.HasPrefix(err.Error(), "config: ") {
		t.Fatalf("missing file: %v", err)
	}
}
