package link

import (
	"strings"
	"testing"
	"time"
)

func TestParseTopologyFile(t *testing.T) {
	src := `
congestion_control: cubic
seed: 7
nodes: [pub, broker, {name: sub, congestion_control: reno}, p1, p2]
links:
  - {name: up, a: pub, b: broker, profile: wifi, loss: 2%, queue: 30000, b_to_a: {queue: "drophead,packets=50"}}
  - name: down
    a: broker
    b: sub
    profile: cellular
    profile_delay: rtt
    b_to_a: {loss: 1%, jitter: 2ms, jitter_dist: uniform}
    schedule:
      - {at: 10s, down: 5s}
      - {at: 20s, loss: 10%, delay: 50ms}
media:
  - {name: cell, hub: broker, stations: [p1, p2], capacity: 20mbit, fer: 5%, retries: 2, delay: 12.5ms}
`
	f, err := ParseTopology("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if f.CongestionControl != "cubic" || f.Seed != 7 || len(f.Topology.Nodes) != 5 || f.Topology.Nodes[2].CongestionControl != "reno" {
		t.Errorf("file options %+v", f)
	}
	up := f.Topology.Links[0]
	if up.AtoB.Delay != 25*time.Millisecond || up.AtoB.Rate != 20_000_000 || up.BtoA.Loss != 0.02 {
		t.Errorf("up link %+v", up)
	}
	if up.AtoB.QueueBytes != 30000 || up.AtoB.Queue != (QueueSpec{}) || up.BtoA.Queue != (QueueSpec{Name: "drophead", Packets: 50}) {
		t.Errorf("up link queues %+v / %+v", up.AtoB, up.BtoA)
	}
	down := f.Topology.Links[1]
	if down.AtoB.Delay != 50*time.Millisecond || down.BtoA.Loss != 0.01 || down.AtoB.Loss != 0 || down.BtoA.JitterDist != "uniform" {
		t.Errorf("down link %+v", down)
	}
	if len(down.AtoB.Schedule) != 2 || *down.AtoB.Schedule[1].Loss != 0.1 || down.AtoB.Schedule[0].Down != 5*time.Second {
		t.Errorf("schedule %+v", down.AtoB.Schedule)
	}
	m := f.Topology.Media[0]
	if m.Capacity != 20_000_000 || m.FrameErrorRate != 0.05 || m.Retries != 2 || m.Delay != 12500*time.Microsecond {
		t.Errorf("medium %+v", m)
	}
}

func TestParseTopologyErrorsNameLineAndField(t *testing.T) {
	cases := []struct{ src, want string }{
		{"links:\n  - {name: l, a: x, b: y, loss: 5%%}\n", "t.yaml:2: links[0].loss: "},
		{"links:\n  - {name: l, a: x, b: y, delay: -5ms}\n", "negative"},
		{"links:\n  - {name: l, a: x, b: y, rate: fast}\n", "not understood"},
		{"links:\n  - {name: l, a: x, b: y, colour: red}\n", "colour"},
		{"nodes: [a]\nlinks:\n  - {name: l, a: a, b: zz}\n", `"zz"`},
		{"", "empty"},
		{"links:\n  - {name: l, a: x, b: y, queue: codel}\n", `t.yaml:2: links[0].queue: queue "codel": unknown discipline`},
		{"media:\n  - {name: m, hub: h, stations: [s], capacity: 1mbit, queue: drophead}\n", "a medium has a drop-tail queue in bytes only"},
	}
	for _, c := range cases {
		_, err := ParseTopology("t.yaml", []byte(c.src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to mention %q", c.src, err, c.want)
		}
	}
}

// TestParseRebind: "rebind: true" in a direction's schedule sets
// Step.Rebind; a rebind in a direction the link leaves clean is refused.
func TestParseRebind(t *testing.T) {
	f, err := ParseTopology("t.yaml", []byte("nodes: [pub, broker]\nlinks:\n  - name: l\n    a: pub\n    b: broker\n    a_to_b:\n      schedule: [{at: 10s, rebind: true}, {at: 20s, loss: 1%}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	l := f.Topology.Links[0]
	if s := l.AtoB.Schedule; len(s) != 2 || !s[0].Rebind || s[0].At != 10*time.Second || s[1].Rebind || len(l.BtoA.Schedule) != 0 {
		t.Errorf("schedules %+v / %+v", l.AtoB.Schedule, l.BtoA.Schedule)
	}
	_, err = ParseTopology("t.yaml", []byte("nodes: [a, b]\nlinks:\n  - {name: l, a: a, b: b, direction: down, a_to_b: {schedule: [{at: 1s, rebind: true}]}}\n"))
	if err == nil || !strings.Contains(err.Error(), "rebind") {
		t.Errorf("rebind in a clean direction: error %v, want it refused", err)
	}
	_, err = ParseTopology("t.yaml", []byte("nodes: [a, b]\nlinks:\n  - {name: l, a: a, b: b, schedule: [{at: 1s, rebound: true}]}\n"))
	if err == nil || !strings.Contains(err.Error(), "rebind") {
		t.Errorf("unknown step key: error %v, want the list of keys with rebind", err)
	}
}
