package link

import (
	"strings"
	"testing"
	"time"
)

func TestParseDirectionAndImpaired(t *testing.T) {
	for in, want := range map[string]Direction{"": DirectionBoth, "both": DirectionBoth, "UP": DirectionUp,
		"a_to_b": DirectionUp, "down": DirectionDown, "b_to_a": DirectionDown} {
		if got, err := ParseDirection(in); err != nil || got != want {
			t.Errorf("ParseDirection(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseDirection("egress"); err == nil || !strings.Contains(err.Error(), "use up (A to B only), down (B to A only) or both") {
		t.Errorf("ParseDirection(egress): %v", err)
	}
	p := Params{Delay: 25 * time.Millisecond, Loss: 0.1, Rate: 1_000_000, MTU: 1400}
	clean := Params{MTU: 1400}
	for _, c := range []struct {
		dir    Direction
		ab, ba Params
	}{
		{"", p, p},
		{DirectionBoth, p, p},
		{DirectionUp, p, clean},
		{DirectionDown, clean, p},
	} {
		ab, ba := Link{AtoB: p, BtoA: p, Direction: c.dir}.Impaired()
		if ab.String() != c.ab.String() || ba.String() != c.ba.String() {
			t.Errorf("direction %q: a->b %s, b->a %s; want %s and %s", c.dir, ab, ba, c.ab, c.ba)
		}
	}
	topo := twoNodes(p, p)
	topo.Links[0].Direction = "sideways"
	if err := topo.Validate(); err == nil || !strings.Contains(err.Error(), `links[0]: direction "sideways" is unknown`) {
		t.Errorf("Validate: %v", err)
	}
}

func TestParseTopologyDirection(t *testing.T) {
	f, err := ParseTopology("t.yaml", []byte("links:\n  - {name: l, a: x, b: y, delay: 300ms, direction: up}\n  - {name: m, a: y, b: z, delay: 5ms}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d := f.Topology.Links[0].Direction; d != DirectionUp {
		t.Errorf("direction %q, want up", d)
	}
	if d := f.Topology.Links[1].Direction; d != DirectionBoth {
		t.Errorf("default direction %q, want both", d)
	}
	_, err = ParseTopology("t.yaml", []byte("links:\n  - {name: l, a: x, b: y, direction: ingress}\n"))
	if err == nil || !strings.Contains(err.Error(), `t.yaml:2: links[0]: direction "ingress" is unknown`) {
		t.Errorf("bad direction: %v", err)
	}
}
