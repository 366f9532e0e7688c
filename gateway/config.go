package gateway

import (
	"fmt"
	"os"

	"github.com/iotq/iotq/internal/yamlconf"
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
	err := yamlconf.Decode(name, data, &o, yamlconf.Options{
		TopKeys:  "routes:, state_dir:, ...",
		Validate: func() error { return o.Validate() },
	})
	if err != nil {
		return Options{}, err
	}
	return o, nil
}

// MarshalConfig renders o in the configuration file format.
func MarshalConfig(o Options) ([]byte, error) { return yamlconf.Marshal(o) }
