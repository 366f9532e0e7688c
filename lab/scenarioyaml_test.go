package lab

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

// TestScenarioYAMLErrors: unknown fields, values of the wrong type and
// syntax errors in a scenario file are reported as the broker's
// configuration errors are (internal/yamlconf): "FILE:LINE: FIELD:
// problem; expected ...", lines counted from the start of the file across
// its documents, every problem at once.
func TestScenarioYAMLErrors(t *testing.T) {
	cases := []struct {
		name, src string
		want      string // a regular expression for the whole error
	}{
		{"unknown field", "experiment: x\nrepetition: 3\n",
			`^s\.yaml:2: repetition: unknown key; expected one of: experiment, description, topology, profiles, .*, repetitions, .*$`},
		{"unknown field in the second document", "experiment: a\n---\nexperiment: b\ntopology: {kind: pub-broker-sub, impared: both}\n",
			`^s\.yaml:4: topology\.impared: unknown key; expected one of: kind, impaired, .*$`},
		{"unknown field under a named profile", "experiment: x\nprofile_defs:\n  slow: {rate: 1mbit, rt: 300ms}\n",
			`^s\.yaml:3: profile_defs\.slow\.rt: unknown key; expected one of: name, rate, .*rtt.*$`},
		{"word for a number", "experiment: x\nmessages: lots\n",
			`^s\.yaml:2: messages: got "lots"; expected a whole number$`},
		{"number for a list", "experiment: x\nqos: 1\n",
			`^s\.yaml:2: qos: got "1"; expected a list, each a whole number$`},
		{"word for a mapping", "experiment: x\ntopology: star\n",
			`^s\.yaml:2: topology: got "star"; expected a mapping of keys$`},
		{"mapping for a list of durations", "experiment: x\nintervals: {a: 1s}\n",
			`^s\.yaml:2: intervals: got a mapping; expected a list, each a duration such as 25ms or 1\.5s$`},
		// The duration's own message; Validate does not add that the
		// undecoded interval is zero.
		{"bad duration", "experiment: x\nintervals: [1s, soon]\n",
			`^s\.yaml:2: intervals\[1\]: duration "soon" is not a duration[^\n]*$`},
		{"bad rate beside good values", "experiment: x\nprofile_defs:\n  p: {rtt: 10ms, rate: fast}\n",
			`^s\.yaml:3: profile_defs\.p\.rate: rate "fast" is not understood[^\n]*$`},
		{"syntax error", "experiment: x\nqos: [1\n",
			`^s\.yaml:\d+: not valid YAML: [^\n]+$`},
		{"syntax error in the second document", "experiment: a\n---\nexperiment: b\n  qos: [1]\n",
			`^s\.yaml:4: not valid YAML: [^\n]+$`},
		{"not a mapping", "- experiment: x\n",
			`^s\.yaml:1: a scenario document must be a mapping of keys \(experiment:, profiles:, .*\), got a list$`},
		{"every problem of every document", "experiment: a\nmessages: lots\n---\nexperiment: b\ncolour: red\nlosses: [200]\n",
			`^s\.yaml:2: messages: got "lots"; expected a whole number\ns\.yaml:5: colour: unknown key; expected one of: [^\n]*\ns\.yaml:6: losses\[0\]: [^\n]*200[^\n]*$`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSpecs("s.yaml", []byte(tc.src))
			if err == nil {
				t.Fatal("accepted a bad file")
			}
			if !regexp.MustCompile(tc.want).MatchString(err.Error()) {
				t.Errorf("error\n%v\ndoes not match\n%s", err, tc.want)
			}
		})
	}
}

// TestScenarioValidationMessagesKept: Validate's problems read as before
// (field path and message), placed at their line.
func TestScenarioValidationMessagesKept(t *testing.T) {
	_, err := ParseSpecs("s.yaml", []byte("experiment: x\nqos:\n  - 0\n  - 3\n"))
	want := "s.yaml:4: qos[1]: 3: want 0, 1 or 2"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want it to say %q", err, want)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Path != "qos[1]" {
		t.Fatalf("not a *FieldError at qos[1]: %#v", fe)
	}
}
