package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// LoadConfig reads a YAML configuration file into Options (keys are the
// yaml names of Options' fields; docs/gateway.md). Unknown keys, wrong
// types and invalid values are all reported at once, as "FILE:LINE: KEY:
// problem".
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
		return o, nil
	}
	if doc := root.Content[0]; doc.Kind != yaml.MappingNode {
		return Options{}, fmt.Errorf("%s:%d: the configuration must be a mapping of keys (routes:, state_dir:, ...)", name, doc.Line)
	}
	lines := map[string]int{}
	indexLines(root.Content[0], "", lines)
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var errs []error
	if err := dec.Decode(&o); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			for _, e := range te.Errors {
				errs = append(errs, fmt.Errorf("%s: %s", name, e))
			}
		} else {
			errs = append(errs, fmt.Errorf("%s: %s", name, strings.TrimPrefix(err.Error(), "yaml: ")))
		}
	}
	if len(errs) == 0 {
		if err := o.Validate(); err != nil {
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var fe *FieldError
				if errors.As(e, &fe) {
					if l := lineOf(lines, fe.Path); l > 0 {
						errs = append(errs, fmt.Errorf("%s:%d: %w", name, l, fe))
						continue
					}
				}
				errs = append(errs, fmt.Errorf("%s: %w", name, e))
			}
		}
	}
	if len(errs) > 0 {
		return Options{}, errors.Join(errs...)
	}
	return o, nil
}

// indexLines records the line of every key path ("routes[0].listen").
func indexLines(n *yaml.Node, path string, lines map[string]int) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := n.Content[i].Value
			if path != "" {
				p = path + "." + p
			}
			lines[p] = n.Content[i].Line
			indexLines(n.Content[i+1], p, lines)
		}
	case yaml.SequenceNode:
		for i, v := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			lines[p] = v.Line
			indexLines(v, p, lines)
		}
	}
}

// lineOf returns the line of path or of its nearest ancestor, or 0.
func lineOf(lines map[string]int, path string) int {
	for p := path; p != ""; {
		if l, ok := lines[p]; ok {
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

// MarshalConfig renders o in the configuration file format.
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
