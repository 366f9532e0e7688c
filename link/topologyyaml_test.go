package link

import (
	"regexp"
	"testing"
)

// TestTopologyYAMLErrors: unknown keys, values of the wrong type and
// syntax errors in a topology file are reported as the broker's
// configuration errors are (internal/yamlconf): "FILE:LINE: KEY: problem;
// expected ...", every problem at once; the keys a link takes from its
// directions' parameters are listed as its own.
func TestTopologyYAMLErrors(t *testing.T) {
	cases := []struct {
		name, src string
		want      string // a regular expression for the whole error
	}{
		{"unknown top-level key", "nodes: [a, b]\nlink:\n  - {name: l, a: a, b: b}\n",
			`^t\.yaml:2: link: unknown key; expected one of: prefix, seed, congestion_control, nodes, links, media$`},
		{"unknown key in a link", "links:\n  - {name: l, a: x, b: y, colour: red}\n",
			`^t\.yaml:2: links\[0\]\.colour: unknown key; expected one of: name, a, b, profile, profile_delay, direction, delay, rtt, jitter, jitter_dist, loss, gilbert_elliott, rate, queue, mtu, reorder, schedule, trace, a_to_b, b_to_a$`},
		{"unknown key in a direction", "links:\n  - name: l\n    a: x\n    b: y\n    a_to_b: {delay: 5ms, los: 1%}\n",
			`^t\.yaml:5: links\[0\]\.a_to_b\.los: unknown key; expected one of: delay, rtt, jitter, .*$`},
		{"unknown key in a node", "nodes: [a, {name: b, hots: true}]\nlinks:\n  - {name: l, a: a, b: b}\n",
			`^t\.yaml:1: nodes\[1\]\.hots: unknown key; expected one of: name, host, congestion_control$`},
		{"word for a number", "links:\n  - {name: l, a: x, b: y, mtu: big}\n",
			`^t\.yaml:2: links\[0\]\.mtu: got "big"; expected a whole number$`},
		{"word for true or false in a node", "nodes: [{name: a, host: maybe}, b]\nlinks: [{name: l, a: a, b: b}]\n",
			`^t\.yaml:1: nodes\[0\]\.host: got "maybe"; expected true or false$`},
		{"word for a list", "nodes: a\nlinks: [{name: l, a: a, b: b}]\n",
			`^t\.yaml:1: nodes: got "a"; expected a list of node names or of mappings \(name, host, congestion_control\)$`},
		{"bad rate", "links:\n  - {name: l, a: x, b: y, rate: fast}\n",
			`^t\.yaml:2: links\[0\]\.rate: rate "fast" is not understood[^\n]*$`},
		{"bad loss in a schedule step", "links:\n  - name: l\n    a: x\n    b: y\n    schedule:\n      - {at: 1s, loss: lots}\n",
			`^t\.yaml:6: links\[0\]\.schedule\[0\]\.loss: [^\n]*"lots"[^\n]*$`},
		{"syntax error", "links:\n  - {name: l, a: x\n",
			`^t\.yaml:\d+: not valid YAML: [^\n]+$`},
		{"not a mapping", "[a, b]\n",
			`^t\.yaml:1: a topology must be a mapping of keys \(nodes:, links:, media:, \.\.\.\), got a list$`},
		{"every problem of decoding at once", "seed: -1\nlinks:\n  - {name: l, a: x, b: y, delay: soon}\n  - {name: m, a: y, b: z, mtu: big}\n",
			`^t\.yaml:1: seed: got "-1"; expected a whole number\nt\.yaml:3: links\[0\]\.delay: [^\n]*"soon"[^\n]*\nt\.yaml:4: links\[1\]\.mtu: got "big"; expected a whole number$`},
		{"every problem of the topology at once", "links:\n  - {name: l, a: x, b: y, profile: wify}\n  - {name: m, a: y, b: z, direction: sideways}\n",
			`^t\.yaml:2: links\[0\]: [^\n]*"wify"[^\n]*\nt\.yaml:3: links\[1\]: direction "sideways"[^\n]*$`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTopology("t.yaml", []byte(tc.src))
			if err == nil {
				t.Fatal("accepted a bad file")
			}
			if !regexp.MustCompile(tc.want).MatchString(err.Error()) {
				t.Errorf("error\n%v\ndoes not match\n%s", err, tc.want)
			}
		})
	}
}
