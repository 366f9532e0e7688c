// Package yamlconf decodes YAML configuration documents into Go structs
// and reports every problem at once, each as "FILE:LINE: KEY: problem"
// with a hint of what was expected: syntax errors, unknown keys (with the
// keys that are allowed there), values of the wrong type, values that an
// UnmarshalYAML method refuses (ValueError), and the *FieldError values a
// Validate function returns, placed at the line of their key path
// ("quic.idle_timeout", "routes[0].upstreams[1]").
//
// It is the one home of the format of the files a user writes: the
// configuration of the long-running servers (broker, gateway: their
// LoadConfig and ParseConfig are thin calls of Decode), the lab's
// scenarios (ParseAll, one document per experiment) and the link
// emulator's topologies. Key names are the fields' yaml tags. The package
// imports nothing of this module and keeps no state.
package yamlconf
