package lab

import (
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/link"
)

// TestImpairmentDirections: E1-E3 impair the publisher's egress only (the
// testbed's traffic control), their -both variants and E4-E6 both
// directions; the emulator gets the matching link direction.
func TestImpairmentDirections(t *testing.T) {
	want := map[string]string{
		"e1": DirectionEgress, "e2": DirectionEgress, "e3": DirectionEgress, "e3b": DirectionEgress,
		"e1-both": "", "e2-both": "", "e3b-both": "",
		"e4": "", "e4b": "", "e5": "", "e6": "", "e7": "", "e7s": "", "e7-wifi": "", "e8": "",
	}
	for name, dir := range want {
		specs, ok := Builtin(name)
		if !ok {
			t.Fatalf("no built-in %s", name)
		}
		cells, err := Cells(specs)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cells {
			if c.PubLink.Direction != dir {
				t.Fatalf("%s: cell %s impaired %q, want %q", name, c.ID, c.PubLink.Direction, dir)
			}
			if c.SubLink.OneDirection() && c.SubLink.DelayNs > 0 {
				t.Fatalf("%s: cell %s sub link %+v", name, c.ID, c.SubLink)
			}
			if strings.Contains(c.ID, "_egress_") != (dir == DirectionEgress) {
				t.Fatalf("%s: id %s", name, c.ID)
			}
			if dir == DirectionEgress && c.Profile == "satellite" && c.PathRTT() != 600*time.Millisecond {
				t.Fatalf("%s: satellite egress-only round trip %v, want 600ms", c.ID, c.PathRTT())
			}
			if name == "e1-both" && c.Profile == "satellite" && c.PathRTT() != 1200*time.Millisecond {
				t.Fatalf("%s: satellite both-ways round trip %v, want 1.2s", c.ID, c.PathRTT())
			}
		}
	}
	// Both in one campaign: distinct cells, same links otherwise.
	specs, _ := Builtin("e1")
	specs[0].Topology.Directions = []string{DirectionEgress, DirectionBoth}
	cells, err := Cells(specs)
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) != 72 {
		t.Fatalf("E1 with two directions: %d cells, want 72", len(cells))
	}
}

func TestDirectionToEmulator(t *testing.T) {
	p := LinkParams{Name: "wifi", RateBps: 20e6, DelayNs: int64(25 * time.Millisecond), LossPct: 5}
	for dir, want := range map[string]link.Direction{"": link.DirectionBoth, DirectionEgress: link.DirectionUp, DirectionIngress: link.DirectionDown} {
		p.Direction = dir
		l, err := toLink(TopoLink{Name: "pub", A: NodePub, B: NodeBroker, Params: p})
		if err != nil {
			t.Fatal(err)
		}
		if l.Direction != want || l.A != NodePub {
			t.Fatalf("%q: emulator direction %q, want %q", dir, l.Direction, want)
		}
		up, down := l.Impaired()
		if dir == DirectionEgress && (up.Delay != 25*time.Millisecond || up.Loss != 0.05 || down.Delay != 0 || down.Loss != 0 || down.Rate != 0) {
			t.Fatalf("egress: publisher to broker %+v, back %+v", up, down)
		}
	}
}

func TestDirectionsValidated(t *testing.T) {
	for _, c := range []struct{ src, field string }{
		{"experiment: x\ntopology: {directions: [sideways]}\n", "topology.directions[0]"},
		{"experiment: x\ntopology: {directions: [egress, egress]}\n", "topology.directions[1]"},
		{"experiment: x\ntopology: {kind: shared-medium, directions: [egress]}\n", "topology.directions"},
	} {
		if _, err := ParseSpecs("s.yaml", []byte(c.src)); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%q: want an error naming %s, got %v", c.src, c.field, err)
		}
	}
	s, err := ParseSpecs("s.yaml", []byte("experiment: x\ntopology: {directions: [egress, both]}\n"))
	if err != nil || len(s) != 1 || len(s[0].Topology.Directions) != 2 {
		t.Fatalf("%v %+v", err, s)
	}
}
