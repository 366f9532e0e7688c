package lab

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/records"
)

func TestBuiltinsAreValidAndExpand(t *testing.T) {
	for _, name := range BuiltinNames() {
		specs, _ := Builtin(name)
		for _, scale := range []string{ScaleSmoke, ScaleReduced, ScaleFull} {
			var scaled []Spec
			for _, s := range specs {
				if err := s.Validate(); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				sc, err := s.Scaled(scale)
				if err != nil {
					t.Fatal(err)
				}
				scaled = append(scaled, sc)
			}
			cells, err := Cells(scaled)
			if err != nil {
				t.Fatalf("%s at %s: %v", name, scale, err)
			}
			if len(cells) == 0 {
				t.Fatalf("%s: no cells", name)
			}
		}
	}
}

func TestBuiltinE1MatchesExperimentsDoc(t *testing.T) {
	specs, _ := Builtin("E1")
	cells, err := Cells(specs)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(cells), 3*6*2; got != want {
		t.Fatalf("E1 has %d cells, want %d", got, want)
	}
	for _, c := range cells {
		if c.Messages != 1000 || c.Interval() != time.Second || c.QoS != 0 || c.Size != 100 {
			t.Fatalf("E1 cell %s: %+v", c.ID, c)
		}
		if c.SubLink.Name != "ethernet" || c.SubLink.DelayNs != 0 {
			t.Fatalf("E1 broker-subscriber link should be clean ethernet: %+v", c.SubLink)
		}
		if c.Profile == "satellite" && (c.PubLink.Delay() != 600*time.Millisecond || c.PubLink.RateBps != 1_500_000) {
			t.Fatalf("satellite one-way: %+v", c.PubLink)
		}
	}
	e4, _ := Builtin("e4")
	cells, err = Cells(e4)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cells {
		if c.Experiment == "E4" && c.Profile == "wifi" {
			// RTT 25 ms on each link: 12.5 ms each way, both links alike.
			if c.PubLink.Delay() != 12500*time.Microsecond || c.SubLink != c.PubLink {
				t.Fatalf("E4 wifi links: %+v %+v", c.PubLink, c.SubLink)
			}
		}
		if c.Experiment == "E4b" && strings.Contains(c.ID, "rtt100ms") && c.SubLink.Delay() != 50*time.Millisecond {
			t.Fatalf("E4b sub link: %+v", c.SubLink)
		}
	}
}

// TestScaleKeepsThePhysics: for every built-in scenario, smoke and reduced
// cut only message counts and repetitions; the inter-arrival time, payload,
// loss, links and everything else of each cell stay as at full scale.
func TestScaleKeepsThePhysics(t *testing.T) {
	for _, name := range BuiltinNames() {
		specs, _ := Builtin(name)
		full, err := Cells(specs)
		if err != nil {
			t.Fatal(err)
		}
		for _, scale := range []string{ScaleSmoke, ScaleReduced} {
			var scaled []Spec
			for _, s := range specs {
				sc, err := s.Scaled(scale)
				if err != nil {
					t.Fatal(err)
				}
				scaled = append(scaled, sc)
			}
			cells, err := Cells(scaled)
			if err != nil {
				t.Fatal(err)
			}
			if len(cells) != len(full) {
				t.Fatalf("%s: %s has %d cells, full %d", name, scale, len(cells), len(full))
			}
			changed := false
			for i := range cells {
				a, b := full[i], cells[i]
				if b.Messages > a.Messages || b.Repetitions > a.Repetitions || b.Messages < 1 || b.Repetitions < 1 {
					t.Fatalf("%s at %s: counts %d x %d, full %d x %d", name, scale, b.Messages, b.Repetitions, a.Messages, a.Repetitions)
				}
				changed = changed || a.Messages != b.Messages || a.Repetitions != b.Repetitions
				// Everything but the two counts must be identical.
				b.Messages, b.Repetitions = a.Messages, a.Repetitions
				if !reflect.DeepEqual(a, b) {
					t.Fatalf("%s at %s changed more than message counts and repetitions:\nfull:   %+v\nscaled: %+v", name, scale, a, b)
				}
			}
			if name != "smoke" && !changed {
				t.Fatalf("%s at %s changed nothing", name, scale)
			}
		}
	}
}

func TestScaleRefusesIntervals(t *testing.T) {
	_, err := ParseSpecs("s.yaml", []byte("experiment: x\nintervals: [1s]\nscales:\n  smoke: {messages: 5, intervals: [100ms]}\n"))
	if err == nil || !strings.Contains(err.Error(), "scales.smoke.intervals") || !strings.Contains(err.Error(), "inter-arrival") {
		t.Fatalf("want an error naming scales.smoke.intervals, got %v", err)
	}
}

func TestParseScenarioFile(t *testing.T) {
	src := `experiment: mine
profiles: [wifi, slow]
profile_defs:
  slow: {rate: 512kbit, rtt: 300ms}
delay: rtt
losses: [0, "2.5%"]
transports: [quic]
qos: [1]
payload_sizes: [64]
patterns: [stop-and-wait, reconnect]
messages: 7
repetitions: 3
tcp_congestion: reno
topology:
  kind: pub-broker-sub
  impaired: both
energy:
  cpu_active_w: 1.5
  radio:
    satellite: {base_w: 10, idle_w: 5}
---
experiment: second
intervals: [10ms]
`
	specs, err := ParseSpecs("x.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 {
		t.Fatalf("%d specs", len(specs))
	}
	cells, err := Cells(specs)
	if err != nil {
		t.Fatal(err)
	}
	// mine: 2 profiles x 2 losses x 2 patterns x 1 transport; second: 2 transports
	if len(cells) != 8+2 {
		t.Fatalf("%d cells", len(cells))
	}
	var slow *Cell
	for i := range cells {
		if cells[i].Profile == "slow" {
			slow = &cells[i]
			break
		}
	}
	if slow == nil || slow.PubLink.RateBps != 512_000 || slow.PubLink.Delay() != 150*time.Millisecond || slow.TCPCongestion != "reno" {
		t.Fatalf("slow profile: %+v", slow)
	}
	if cells[2].LossPct != 2.5 && cells[1].LossPct != 2.5 {
		t.Fatalf("loss 2.5%% not parsed: %+v", cells[:3])
	}
	// Round trip through the YAML writer gives the same cells.
	b, err := MarshalSpecs(specs)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseSpecs("again", b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	cells2, err := Cells(again)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cells, cells2) {
		t.Fatalf("marshal round trip changed cells:\n%s", b)
	}
}

func TestBadScenarioFilesNameTheField(t *testing.T) {
	cases := []struct {
		name string
		src  string
		want []string
	}{
		{"unknown field", "experiment: x\nprofile: [wifi]\n", []string{"x.yaml:2: profile: unknown key; expected one of: experiment, description, topology, profiles,"}},
		{"unknown nested field", "experiment: x\ntopology:\n  kindd: shared-medium\n", []string{"x.yaml:3: topology.kindd: unknown key; expected one of: kind, impaired,"}},
		{"bad loss", "experiment: x\nlosses: [0, 5%%]\n", []string{"x.yaml:2: losses[1]: ", "5%%"}},
		{"loss too high", "experiment: x\nlosses: [0, 150]\n", []string{"x.yaml:2", "losses[1]", "150%"}},
		{"bad rate", "experiment: x\nprofile_defs:\n  p: {rate: fast}\n", []string{"x.yaml:3: profile_defs.p.rate: ", "rate \"fast\""}},
		{"bad duration", "experiment: x\nintervals: [1 second]\n", []string{"x.yaml:2: intervals[0]: ", "duration"}},
		{"unknown profile", "experiment: x\nprofiles:\n  - wifi\n  - wify\n", []string{"x.yaml:4", "profiles[1]", "unknown profile \"wify\""}},
		{"all problems at once", "experiment: x\ntransports: [tcp]\nqos: [3]\npayload_sizes: [4]\n", []string{"transports[0]", "qos[0]", "payload_sizes[0]", ":2:", ":3:", ":4:"}},
		{"qos 0 stop-and-wait", "experiment: x\npatterns: [stop-and-wait]\n", []string{"patterns[0]", "QoS 1"}},
		{"missing experiment", "profiles: [wifi]\n", []string{"experiment", "missing"}},
		{"retries on line topology", "experiment: x\ntopology:\n  retries: [1]\n", []string{"topology.retries", ":3:"}},
		{"bad kind", "experiment: x\ntopology: {kind: star}\n", []string{"topology.kind", "star"}},
		{"bad congestion", "experiment: x\ntcp_congestion: vegas\n", []string{"tcp_congestion", "vegas"}},
		{"bad scale", "experiment: x\nscales:\n  huge: {messages: 5}\n", []string{"scales.huge"}},
		{"empty file", "", []string{"no experiment"}},
		{"syntax", "experiment: [x\n", []string{"x.yaml:", "not valid YAML"}},
		{"duplicate", "experiment: a\n---\nexperiment: a\n", []string{"twice"}},
		{"negative energy", "experiment: x\nenergy:\n  radio:\n    wifi: {base_w: -1}\n", []string{"energy.radio.wifi.base_w", ":4:"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSpecs("x.yaml", []byte(tc.src))
			if err == nil {
				t.Fatal("accepted a bad file")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestResolveFileAndBuiltin(t *testing.T) {
	if _, err := Resolve("SMOKE"); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(p, []byte("experiment: filed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Resolve(p)
	if err != nil || s[0].Experiment != "filed" {
		t.Fatalf("%v %v", s, err)
	}
	if _, err := Resolve("nosuch"); err == nil || !strings.Contains(err.Error(), "built-in") {
		t.Fatalf("unknown scenario error: %v", err)
	}
}

func TestShardsPartitionCells(t *testing.T) {
	specs, _ := Builtin("e1")
	cells, _ := Cells(specs)
	seen := map[string]int{}
	for i := 0; i < 3; i++ {
		for _, c := range Shard(cells, i, 3) {
			seen[c.ID]++
		}
	}
	if len(seen) != len(cells) {
		t.Fatalf("shards cover %d of %d cells", len(seen), len(cells))
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("cell %s in %d shards", id, n)
		}
	}
	for _, bad := range []string{"0/2", "3/2", "x", "1/0", "1/2/3"} {
		if _, _, err := ParseShard(bad); err == nil {
			t.Errorf("ParseShard(%q) accepted", bad)
		}
	}
	if i, n, err := ParseShard("2/4"); err != nil || i != 1 || n != 4 {
		t.Fatalf("ParseShard 2/4 = %d %d %v", i, n, err)
	}
}

func TestUnits(t *testing.T) {
	for in, want := range map[string]Rate{"20mbit": 20_000_000, "1.5mbit": 1_500_000, "512kbit": 512_000, "10gbit": 10_000_000_000, "1mbps": 8_000_000, "0": 0} {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %d, %v", in, got, err)
		}
		if again, err := ParseRate(got.String()); err != nil || again != got {
			t.Errorf("rate %d does not round trip via %q", got, got.String())
		}
	}
	for _, bad := range []string{"fast", "-1mbit", "mbit", "5%"} {
		if _, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) accepted", bad)
		}
	}
	if _, err := ParseDuration("-5ms"); err == nil {
		t.Error("negative duration accepted")
	}
}

func TestEnergyManifestUnits(t *testing.T) {
	e := DefaultEnergy()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	json.Unmarshal(b, &raw)
	if raw["cpu_active_mw"].(float64) != 2000 {
		t.Fatalf("cpu_active_mw: %s", b)
	}
	// the whole-device model's base power, with its source (E3a)
	if raw["board_base_mw"].(float64) != 2550 || !strings.Contains(raw["board_source"].(string), "bare-board active current") {
		t.Fatalf("board base: %s", b)
	}
	if s, err := ParseSpecs("b.yaml", []byte("experiment: b\nenergy: {board_base_w: 3.1}\n")); err != nil || s[0].Resolved().Energy.BoardBaseW != 3.1 || s[0].Resolved().Energy.BoardSource != "scenario file" {
		t.Fatalf("board_base_w from a scenario: %v %+v", err, s)
	}
	if _, err := ParseSpecs("b.yaml", []byte("experiment: b\nenergy: {board_base_w: -1}\n")); err == nil || !strings.Contains(err.Error(), "energy.board_base_w") {
		t.Fatalf("negative board base: %v", err)
	}
	lte := raw["radio"].(map[string]any)["lte"].(map[string]any)
	if lte["tail_ms"].(float64) != 11576 || lte["active_base_mw"].(float64) != 1288.04 {
		t.Fatalf("lte: %v", lte)
	}
	var back EnergyModel
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if d := back.Radio["lte"].TailS - 11.576; d > 1e-9 || d < -1e-9 {
		t.Fatalf("round trip: %+v", back.Radio["lte"])
	}
}

func TestExampleScenarioFilesParse(t *testing.T) {
	files, err := filepath.Glob("../scenarios/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example scenarios: %v", err)
	}
	for _, f := range files {
		specs, err := LoadSpecs(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if _, err := Cells(specs); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestBuiltinE8MatchesExperimentsDoc: E8 as docs/experiments.md states it:
// sender and receiver behind profile links (round-trip convention, both
// links alike), loss 0-15 %, AMQP over TCP+TLS vs over QUIC, a batch of
// 100 messages of 100 B at least once, 20 repetitions, fresh and resumed,
// and fresh with the receiver's echo.
func TestBuiltinE8MatchesExperimentsDoc(t *testing.T) {
	specs, _ := Builtin("e8")
	cells, err := Cells(specs)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(cells), 3*5*2*3; got != want {
		t.Fatalf("E8 has %d cells, want %d", got, want)
	}
	seen := map[string]bool{}
	for _, c := range cells {
		seen[c.Transport+"/"+c.Pattern] = true
		if c.Protocol != records.ProtocolAMQP || c.Messages != 100 || c.Size != 100 || c.QoS != 1 || c.Repetitions != 20 || c.SubLink != c.PubLink {
			t.Fatalf("E8 cell %s: %+v", c.ID, c)
		}
		if c.Profile == "satellite" && c.PubLink.Delay() != 300*time.Millisecond {
			t.Fatalf("satellite RTT 600 ms: %+v", c.PubLink)
		}
	}
	if len(seen) != 6 || !seen["amqps/batch"] || !seen["amqp+quic/batch-resume"] || !seen["amqps/batch-echo"] {
		t.Fatalf("transports x patterns: %v", seen)
	}
}

// TestTransportsNameTheProtocol: the transports list takes every scheme
// the lab has a broker for, and says what is wrong with the others.
func TestTransportsNameTheProtocol(t *testing.T) {
	ok := Spec{Experiment: "x", Transports: []string{"mqtts", "quic", "amqps", "amqp+quic", "mqtt", "coap", "coap+quic"}, QoS: []int{1}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		s    Spec
		want string
	}{
		{Spec{Experiment: "x", Transports: []string{"http"}}, "want a broker URL scheme"},
		{Spec{Experiment: "x", Transports: []string{"coaps"}}, "no broker for it yet"},
		{Spec{Experiment: "x", Transports: []string{"coap"}, QoS: []int{2}}, "CoAP has non-confirmable"},
		{Spec{Experiment: "x", Transports: []string{"amqps"}, QoS: []int{2}}, "AMQP has at-most-once"},
		{Spec{Experiment: "x", Transports: []string{"amqp+quic"}, QoS: []int{1}, Patterns: []string{PatternReconnect}}, "use batch-resume"},
	} {
		if err := tc.s.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.s.Transports, err, tc.want)
		}
	}
}

// TestBuiltinE7MatchesExperimentsDoc: E7 as docs/experiments.md states it
// (the study's own set-up): both legs, publisher-broker and
// broker-subscriber, lossy in both directions alike, a LAN without added
// delay, loss 0-25 %, MQTT over TCP and CoAP over UDP, plus both over
// QUIC, QoS 1 (CoAP confirmable), 60 B, at least 500 messages; the size
// sweep 16 B - 2 KiB at 0 and 10 %. e7-wifi keeps the earlier set-up.
func TestBuiltinE7MatchesExperimentsDoc(t *testing.T) {
	specs, _ := Builtin("e7")
	cells, err := Cells(specs)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(cells), 6*4+2*5*4; got != want {
		t.Fatalf("E7 has %d cells, want %d", got, want)
	}
	protos := map[string]bool{}
	for _, c := range cells {
		protos[c.Protocol+"/"+c.Transport] = true
		if c.QoS != 1 || c.Messages < 500 || c.Pattern != PatternClosedLoop || c.PubLink.OneDirection() || c.PubLink.Name != "lan" {
			t.Fatalf("E7 cell %s: %+v", c.ID, c)
		}
		if c.SubLink != c.PubLink || c.PubLink.DelayNs != 0 || c.PubLink.LossPct != c.LossPct || c.PathRTT() != 0 {
			t.Fatalf("E7 cell %s: both legs must carry the loss without delay: pub %+v sub %+v", c.ID, c.PubLink, c.SubLink)
		}
		if c.Experiment == "E7" && c.Size != 60 {
			t.Fatalf("E7 cell %s: size %d", c.ID, c.Size)
		}
	}
	if len(protos) != 4 || !protos["coap/coap"] || !protos["mqtt/mqtt"] || !protos["coap/coap+quic"] || !protos["mqtt/quic"] {
		t.Fatalf("protocols: %v", protos)
	}
	specs, _ = Builtin("e7-wifi")
	cells, err = Cells(specs)
	if err != nil || len(cells) != 6*4+2*5*4 {
		t.Fatalf("e7-wifi: %d cells, %v", len(cells), err)
	}
	for _, c := range cells {
		if c.PubLink.Name != "wifi" || c.PubLink.DelayNs != int64(25*time.Millisecond) || c.SubLink.Name != "ethernet" || c.SubLink.LossPct != 0 {
			t.Fatalf("e7-wifi cell %s: pub %+v sub %+v", c.ID, c.PubLink, c.SubLink)
		}
	}
}
