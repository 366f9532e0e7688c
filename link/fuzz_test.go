package link

import (
	"testing"
)

// FuzzParseTopology: no input makes the parser panic, and whatever it
// accepts validates.
func FuzzParseTopology(f *testing.F) {
	f.Add([]byte("links:\n  - {name: up, a: pub, b: broker, profile: wifi, loss: 2%}\n"))
	f.Add([]byte("media:\n  - {name: c, hub: h, stations: [a, b], capacity: 20mbit, fer: 5%, retries: 2}\n"))
	f.Add([]byte("nodes: [{name: a, host: true}, b]\nlinks: [{name: l, a: a, b: b, schedule: [{at: 1s, down: 2s}]}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tf, err := ParseTopology("f.yaml", data)
		if err == nil {
			if verr := tf.Topology.Validate(); verr != nil {
				t.Fatalf("accepted a topology that does not validate: %v", verr)
			}
		}
	})
}

// FuzzParseWords: the CLI's word parsers never panic and never return a
// value outside their range without an error.
func FuzzParseWords(f *testing.F) {
	for _, s := range []string{"20mbit", "1.5mbit", "5%", "0.5%", "25ms", "-1", "1e400", "NaN", "5%%", "64kb", "1%,25%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if r, err := ParseRate(s); err == nil && r < 0 {
			t.Fatalf("ParseRate(%q) = %d", s, r)
		}
		if l, err := ParseLoss(s); err == nil && (l < 0 || l > 1) {
			t.Fatalf("ParseLoss(%q) = %v", s, l)
		}
		if d, err := ParseDuration("delay", s); err == nil && d < 0 {
			t.Fatalf("ParseDuration(%q) = %v", s, d)
		}
		if b, err := ParseBytes(s); err == nil && b < 0 {
			t.Fatalf("ParseBytes(%q) = %d", s, b)
		}
		if g, err := ParseGE(s); err == nil {
			if err := (Params{GilbertElliott: &g}).Validate("ge"); err != nil {
				t.Fatalf("ParseGE(%q) = %+v: %v", s, g, err)
			}
		}
	})
}
