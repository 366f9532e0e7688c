// Package yamlconf decodes one YAML configuration document into a Go
// struct and reports every problem at once, each as
// "FILE:LINE: KEY: problem" with a hint of what was expected: unknown keys
// (with the keys that are allowed there), values of the wrong type, and
// the *FieldError values a Validate function returns, placed at the line
// of their key path ("quic.idle_timeout", "routes[0].upstreams[1]").
//
// It is the one home of the configuration-file format of the long-running
// servers (broker, gateway): their LoadConfig and ParseConfig are thin
// calls of Decode. Key names are the fields' yaml tags. The package
// imports nothing of this module and keeps no state.
package yamlconf
