package gateway

import "github.com/iotq/iotq/internal/yamlconf"

// LoadConfig reads a YAML configuration file into Options (keys are the
// yaml names of Options' fields; docs/gateway.md). Unknown keys, wrong
// types and invalid values are all reported at once, as "FILE:LINE: KEY:
// problem".
func LoadConfig(path string) (Options, error) {
	return yamlconf.Load[Options](path, configFormat())
}

// ParseConfig is LoadConfig on bytes; name labels the errors.
func ParseConfig(name string, data []byte) (Options, error) {
	return yamlconf.Parse[Options](name, data, configFormat())
}

// configFormat tunes the messages of the configuration file (Options'
// Validate runs after decoding).
func configFormat() yamlconf.Options {
	return yamlconf.Options{
		TopKeys: "routes:, state_dir:, ...",
	}
}

// MarshalConfig renders o in the configuration file format.
func MarshalConfig(o Options) ([]byte, error) { return yamlconf.Marshal(o) }
