package broker

import "github.com/iotq/iotq/internal/yamlconf"

// LoadConfig reads a YAML configuration file into Options (the file's keys
// are the yaml names of Options' fields; see docs/broker.md). Unknown keys,
// wrong types and invalid values are all reported at once, each as
// "FILE:LINE: KEY: problem; expected ...".
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
		TopKeys: "listen:, state_dir:, ...",
		Expect: map[string]string{
			"[]string": "a list of strings, e.g. [mqtt://0.0.0.0:1883, quic://0.0.0.0:14567]",
		},
	}
}

// MarshalConfig renders o as YAML in the configuration file format.
func MarshalConfig(o Options) ([]byte, error) { return yamlconf.Marshal(o) }
