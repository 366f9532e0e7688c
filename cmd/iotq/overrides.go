package main

import (
	"flag"
	"strings"
	"time"
)

// overrides binds command-line flags to fields of an options value that may
// also come from a configuration file. After parsing, applyTo copies the
// value of every flag given on the command line into its field, so flags
// win over the file; a flag not given leaves the field as the file (or the
// zero value, which the options' defaults fill in) has it. It is the one
// flag/config merge mechanism of iotq's commands.
type overrides[T any] struct {
	fs    *flag.FlagSet
	binds map[string]func(*T)
}

func newOverrides[T any](fs *flag.FlagSet) *overrides[T] {
	return &overrides[T]{fs: fs, binds: map[string]func(*T){}}
}

// String registers a string flag bound to field.
func (o *overrides[T]) String(name, def, usage string, field func(*T) *string) {
	v := o.fs.String(name, def, usage)
	o.binds[name] = func(t *T) { *field(t) = *v }
}

// Int registers an int flag bound to field.
func (o *overrides[T]) Int(name string, def int, usage string, field func(*T) *int) {
	v := o.fs.Int(name, def, usage)
	o.binds[name] = func(t *T) { *field(t) = *v }
}

// Bool registers a bool flag bound to field.
func (o *overrides[T]) Bool(name string, def bool, usage string, field func(*T) *bool) {
	v := o.fs.Bool(name, def, usage)
	o.binds[name] = func(t *T) { *field(t) = *v }
}

// BoolPtr registers a bool flag bound to an optional field (nil: default).
func (o *overrides[T]) BoolPtr(name string, def bool, usage string, field func(*T) **bool) {
	v := o.fs.Bool(name, def, usage)
	o.binds[name] = func(t *T) { b := *v; *field(t) = &b }
}

// Duration registers a duration flag bound to field.
func (o *overrides[T]) Duration(name string, def time.Duration, usage string, field func(*T) *time.Duration) {
	v := o.fs.Duration(name, def, usage)
	o.binds[name] = func(t *T) { *field(t) = *v }
}

// List registers a repeatable string flag bound to field.
func (o *overrides[T]) List(name, usage string, field func(*T) *[]string) {
	var v stringList
	o.fs.Var(&v, name, usage)
	o.binds[name] = func(t *T) { *field(t) = v }
}

// Var registers a flag of any flag.Value; bind copies its value into t.
func (o *overrides[T]) Var(name, usage string, v flag.Value, bind func(*T)) {
	o.fs.Var(v, name, usage)
	o.binds[name] = bind
}

// stringList is a repeatable string flag (--listen, -t, --route).
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// applyTo copies the flags given on the command line into t. Call it after
// the flag set was parsed.
func (o *overrides[T]) applyTo(t *T) {
	o.fs.Visit(func(f *flag.Flag) {
		if bind := o.binds[f.Name]; bind != nil {
			bind(t)
		}
	})
}
