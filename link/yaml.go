package link

import (
	"errors"
	"fmt"
	"time"

	"github.com/iotq/iotq/internal/yamlconf"
	"github.com/iotq/iotq/link/trace"
	"go.yaml.in/yaml/v3"
)

// TopologyFile is a topology read from YAML, with the run options the file
// may carry.
type TopologyFile struct {
	Topology          Topology
	Prefix            string
	Seed              uint64
	CongestionControl string
}

// ParseTopology reads a topology file. The words are the CLI's: durations
// as Go writes them (25ms, 1.5s), rates as tc does (20mbit), loss as a
// percentage (5%). name labels the errors (the file's path): they are
// reported all at once as the broker's configuration errors are
// (internal/yamlconf), each as "NAME:LINE: FIELD: problem". Example:
//
//	congestion_control: cubic
//	nodes: [pub, broker, sub]
//	links:
//	  - {name: up, a: pub, b: broker, profile: wifi, loss: 2%}
//	  - name: down
//	    a: broker
//	    b: sub
//	    rtt: 50ms           # or delay: 25ms (one-way, each direction)
//	    rate: 100mbit
//	    b_to_a: {loss: 1%}  # per-direction overrides
//	    direction: up       # impair a->b only (down: b->a only; default both)
//	media:
//	  - {name: cell, hub: broker, stations: [p1, p2], capacity: 20mbit, fer: 5%, retries: 2, delay: 12.5ms}
func ParseTopology(name string, data []byte) (TopologyFile, error) {
	var f yFile
	var out TopologyFile
	checked := false
	err := yamlconf.Decode(name, data, &f, yamlconf.Options{
		Document: "a topology",
		TopKeys:  "nodes:, links:, media:, ...",
		Expect: map[string]string{
			"[]link.yNode":     "a list of node names or of mappings (name, host, congestion_control)",
			"link.yNodeFields": "a node name or a mapping of keys (name, host, congestion_control)",
		},
		// A node the decoder could not read is dropped from the list: the
		// links naming it would be reported as problems too.
		ValidateDecoded: true,
		Validate: func() error {
			checked = true
			var err error
			out, err = f.topology()
			return err
		},
	})
	if err != nil {
		return TopologyFile{}, err
	}
	if !checked { // an empty document is not validated
		return TopologyFile{}, fmt.Errorf("%s: topology file is empty: it needs nodes and links", name)
	}
	return out, nil
}

// topology turns the decoded file into a TopologyFile. The problems of a
// link or medium are *yamlconf.FieldError (Decode places them at the
// item's line); those of the whole topology are its Validate's.
func (f *yFile) topology() (TopologyFile, error) {
	out := TopologyFile{Prefix: f.Prefix, Seed: f.Seed, CongestionControl: f.CongestionControl}
	var errs []error
	bad := func(path string, err error) {
		errs = append(errs, &yamlconf.FieldError{Path: path, Msg: err.Error()})
	}
	for _, n := range f.Nodes {
		out.Topology.Nodes = append(out.Topology.Nodes, Node(n))
	}
	if len(f.Nodes) == 0 { // nodes may be left implicit: every name a link or medium uses
		seen := map[string]bool{}
		add := func(name string) {
			if name != "" && !seen[name] {
				seen[name] = true
				out.Topology.Nodes = append(out.Topology.Nodes, Node{Name: name})
			}
		}
		for _, l := range f.Links {
			add(l.A)
			add(l.B)
		}
		for _, m := range f.Media {
			add(m.Hub)
			for _, s := range m.Stations {
				add(s)
			}
		}
	}
	for i, l := range f.Links {
		base := Params{}
		if l.Profile != "" {
			p, err := ProfileByName(l.Profile)
			if err != nil {
				bad(fmt.Sprintf("links[%d]", i), err)
			}
			switch l.ProfileDelay {
			case "", "one-way", "oneway":
				base = p.OneWay()
			case "rtt", "round-trip":
				base = p.RTT()
			default:
				bad(fmt.Sprintf("links[%d]", i), fmt.Errorf("profile_delay %q: use one-way or rtt", l.ProfileDelay))
			}
		}
		common := l.apply(base)
		common, err := l.withTrace(common)
		if err != nil {
			bad(fmt.Sprintf("links[%d]", i), err)
		}
		ab, ba := common, common
		if l.AtoB != nil {
			ab = l.AtoB.apply(common)
			if ab, err = l.AtoB.withTrace(ab); err != nil {
				bad(fmt.Sprintf("links[%d].a_to_b", i), err)
			}
		}
		if l.BtoA != nil {
			ba = l.BtoA.apply(common)
			if ba, err = l.BtoA.withTrace(ba); err != nil {
				bad(fmt.Sprintf("links[%d].b_to_a", i), err)
			}
		}
		dir, err := ParseDirection(l.Direction)
		if err != nil {
			bad(fmt.Sprintf("links[%d]", i), err)
		}
		out.Topology.Links = append(out.Topology.Links, Link{Name: l.Name, A: l.A, B: l.B, AtoB: ab, BtoA: ba, Direction: dir})
	}
	for i, m := range f.Media {
		p := m.apply(Params{})
		if m.Trace != nil {
			bad(fmt.Sprintf("media[%d]", i), fmt.Errorf("trace %s: a medium has a capacity, not a trace (traces drive point-to-point links)", *m.Trace))
		}
		if p.Queue != (QueueSpec{}) {
			bad(fmt.Sprintf("media[%d]", i), fmt.Errorf("queue %s: a medium has a drop-tail queue in bytes only (write queue: 30000)", p.Queue))
		}
		mp := MediumParams{Delay: p.Delay, Jitter: p.Jitter, JitterDist: p.JitterDist,
			QueueBytes: p.QueueBytes, MTU: p.MTU, Retries: m.Retries}
		if m.Capacity != nil {
			mp.Capacity = int64(*m.Capacity)
		}
		if m.FER != nil {
			mp.FrameErrorRate = float64(*m.FER)
		}
		if m.Slot != nil {
			mp.Slot = time.Duration(*m.Slot)
		}
		out.Topology.Media = append(out.Topology.Media, Medium{Name: m.Name, Hub: m.Hub, Stations: m.Stations, MediumParams: mp})
	}
	if err := out.Topology.Validate(); err != nil {
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

type yFile struct {
	Prefix            string   `yaml:"prefix"`
	Seed              uint64   `yaml:"seed"`
	CongestionControl string   `yaml:"congestion_control"`
	Nodes             []yNode  `yaml:"nodes"`
	Links             []yLink  `yaml:"links"`
	Media             []yMedia `yaml:"media"`
}

type yNode struct {
	Name              string `yaml:"name"`
	Host              bool   `yaml:"host"`
	CongestionControl string `yaml:"congestion_control"`
}

// yNodeFields is yNode without its UnmarshalYAML method.
type yNodeFields yNode

// UnmarshalYAML reads a node's name or its mapping of keys.
func (n *yNode) UnmarshalYAML(v *yaml.Node) error {
	if v.Kind == yaml.ScalarNode {
		n.Name = v.Value
		return nil
	}
	// v.Decode lets unknown keys pass.
	if err := yamlconf.CheckKeys(v, n); err != nil {
		return err
	}
	return v.Decode((*yNodeFields)(n))
}

type yParams struct {
	Delay      *yDur    `yaml:"delay"`
	RTT        *yDur    `yaml:"rtt"`
	Jitter     *yDur    `yaml:"jitter"`
	JitterDist *string  `yaml:"jitter_dist"`
	Loss       *yLoss   `yaml:"loss"`
	GE         *yGE     `yaml:"gilbert_elliott"`
	Rate       *yRate   `yaml:"rate"`
	Queue      *yQueue  `yaml:"queue"`
	MTU        *int     `yaml:"mtu"`
	Reorder    *bool    `yaml:"reorder"`
	Schedule   *[]yStep `yaml:"schedule"`
	// Trace names a packet-delivery trace (Mahimahi's format): a shipped
	// one (link/trace) or a file; it replaces the rate.
	Trace *string `yaml:"trace"`
}

// withTrace sets the trace y names on p (replacing its rate); the error
// says what is wrong with it.
func (y *yParams) withTrace(p Params) (Params, error) {
	if y == nil || y.Trace == nil {
		return p, nil
	}
	if y.Rate != nil {
		return p, fmt.Errorf("rate and trace %s: the trace sets the rate; leave rate out", *y.Trace)
	}
	tr, err := trace.Resolve(*y.Trace)
	if err != nil {
		return p, err
	}
	p.Trace, p.Rate = tr, 0
	return p, nil
}

func (y yParams) apply(p Params) Params {
	if y.RTT != nil {
		p.Delay = time.Duration(*y.RTT) / 2
	}
	if y.Delay != nil {
		p.Delay = time.Duration(*y.Delay)
	}
	if y.Jitter != nil {
		p.Jitter = time.Duration(*y.Jitter)
	}
	if y.JitterDist != nil {
		p.JitterDist = *y.JitterDist
	}
	if y.Loss != nil {
		p.Loss = float64(*y.Loss)
	}
	if y.GE != nil {
		p.GilbertElliott = &GE{P: float64(y.GE.P), R: float64(y.GE.R), H: float64(y.GE.H), K: float64(y.GE.K)}
	}
	if y.Rate != nil {
		p.Rate = int64(*y.Rate)
	}
	if y.Queue != nil {
		p.Queue = QueueSpec(*y.Queue)
		if p.Queue.Name == "" && p.Queue.Packets == 0 { // a bare size
			p.QueueBytes, p.Queue = p.Queue.Bytes, QueueSpec{}
		}
	}
	if y.MTU != nil {
		p.MTU = *y.MTU
	}
	if y.Reorder != nil {
		p.Reorder = *y.Reorder
	}
	if y.Schedule != nil {
		p.Schedule = nil
		for _, s := range *y.Schedule {
			st := Step{At: time.Duration(s.At), Down: time.Duration(s.Down), Rebind: s.Rebind}
			if s.Loss != nil {
				v := float64(*s.Loss)
				st.Loss = &v
			}
			if s.Delay != nil {
				v := time.Duration(*s.Delay)
				st.Delay = &v
			}
			if s.Rate != nil {
				v := int64(*s.Rate)
				st.Rate = &v
			}
			p.Schedule = append(p.Schedule, st)
		}
	}
	return p
}

type yLink struct {
	Name         string `yaml:"name"`
	A            string `yaml:"a"`
	B            string `yaml:"b"`
	Profile      string `yaml:"profile"`
	ProfileDelay string `yaml:"profile_delay"`
	Direction    string `yaml:"direction"`
	yParams      `yaml:",inline"`
	AtoB         *yParams `yaml:"a_to_b"`
	BtoA         *yParams `yaml:"b_to_a"`
}

type yMedia struct {
	Name     string   `yaml:"name"`
	Hub      string   `yaml:"hub"`
	Stations []string `yaml:"stations"`
	Capacity *yRate   `yaml:"capacity"`
	FER      *yLoss   `yaml:"fer"`
	Retries  int      `yaml:"retries"`
	Slot     *yDur    `yaml:"slot"`
	yParams  `yaml:",inline"`
}

type yGE struct {
	P yLoss `yaml:"p"`
	R yLoss `yaml:"r"`
	H yLoss `yaml:"1-h"`
	K yLoss `yaml:"1-k"`
}

type yStep struct {
	At     yDur   `yaml:"at"`
	Down   yDur   `yaml:"down"`
	Loss   *yLoss `yaml:"loss"`
	Delay  *yDur  `yaml:"delay"`
	Rate   *yRate `yaml:"rate"`
	Rebind bool   `yaml:"rebind"`
}

type yDur time.Duration

func (d *yDur) UnmarshalYAML(v *yaml.Node) error {
	x, err := ParseDuration("duration", v.Value)
	if err != nil {
		return yamlconf.ValueError(v, err)
	}
	*d = yDur(x)
	return nil
}

type yRate int64

func (r *yRate) UnmarshalYAML(v *yaml.Node) error {
	x, err := ParseRate(v.Value)
	if err != nil {
		return yamlconf.ValueError(v, err)
	}
	*r = yRate(x)
	return nil
}

type yLoss float64

func (l *yLoss) UnmarshalYAML(v *yaml.Node) error {
	x, err := ParseLoss(v.Value)
	if err != nil {
		return yamlconf.ValueError(v, err)
	}
	*l = yLoss(x)
	return nil
}

type yQueue QueueSpec

func (q *yQueue) UnmarshalYAML(v *yaml.Node) error {
	x, err := ParseQueue(v.Value)
	if err != nil {
		return yamlconf.ValueError(v, err)
	}
	*q = yQueue(x)
	return nil
}
