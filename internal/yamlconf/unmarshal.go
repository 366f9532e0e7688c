package yamlconf

import (
	"fmt"
	"reflect"

	"go.yaml.in/yaml/v3"
)

// ValueError is what an UnmarshalYAML method returns when it refuses the
// value n (err says why and what to write instead): Decode reports it as
// "NAME:LINE: KEY: err" at the value's key path and goes on decoding the
// rest of the document, where a plain error would stop the decoder at the
// first bad value.
func ValueError(n *yaml.Node, err error) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: column %d: %v", n.Line, n.Column, err)}}
}

// CheckKeys is for an UnmarshalYAML method that decodes a mapping n itself
// with yaml.Node.Decode, which lets unknown keys pass: it returns an error
// naming every key of n that the struct v (or *v) has no field for, which
// Decode reports as it reports its own unknown keys, or nil when there is
// none or n is not a mapping.
func CheckKeys(n *yaml.Node, v any) error {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	t := reflect.TypeOf(v)
	known := map[string]bool{}
	for _, k := range KeysAt(t, "") {
		known[k] = true
	}
	var bad []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; !known[k.Value] {
			// The decoder's own words, which explain reads.
			bad = append(bad, fmt.Sprintf("line %d: field %s not found in type %s", k.Line, k.Value, elem(t)))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &yaml.TypeError{Errors: bad}
}
