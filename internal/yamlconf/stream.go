package yamlconf

import (
	"bytes"
	"errors"
	"io"

	"go.yaml.in/yaml/v3"
)

// ParseAll decodes every document of data, a YAML stream labelled name in
// errors (documents separated by "---"), each into a new T as Decode
// decodes one, and returns them in order; empty documents are skipped.
// Lines count from the start of the stream. Each T's Validate() error
// method runs after its document, if T has one (Options.Validate, which
// checks one value, is not used). The problems of all documents are
// reported in one error, ordered by line; on error no value is returned.
func ParseAll[T any](name string, data []byte, opts Options) ([]T, error) {
	// Two decoders in step over the same stream: one gives each
	// document's nodes (for lines and key paths), the other decodes it
	// with unknown keys refused, which yaml.Node.Decode cannot.
	nodes := yaml.NewDecoder(bytes.NewReader(data))
	values := yaml.NewDecoder(bytes.NewReader(data))
	values.KnownFields(true)
	var out []T
	var errs []lineError
	for {
		var doc yaml.Node
		if err := nodes.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			errs = append(errs, syntaxError(name, err))
			break
		}
		v := new(T)
		derr := values.Decode(v)
		if empty(&doc) {
			continue
		}
		var validate func() error
		if vv, ok := any(v).(validator); ok {
			validate = vv.Validate
		}
		if e := check(name, &doc, v, derr, validate, opts); len(e) > 0 {
			errs = append(errs, e...)
			continue
		}
		out = append(out, *v)
	}
	if len(errs) > 0 {
		return nil, joinByLine(errs)
	}
	return out, nil
}
