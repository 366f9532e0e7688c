package lab

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/records"
)

// TestE9Expand: the built-in e9 makes per profile and loss 8 cells with and
// 8 without the large topic (TCP+TLS and QUIC one stream and per-topic at
// QoS 0 and 1, the two datagram forms at QoS 0 only), names topics and the
// large topic in the id, and is estimated at its stream's length.
func TestE9Expand(t *testing.T) {
	specs, ok := Builtin("e9")
	if !ok {
		t.Fatal("no built-in e9")
	}
	cells, err := Cells(specs)
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) != 2*5*16 {
		t.Fatalf("%d cells, want 160", len(cells))
	}
	byID := map[string]Cell{}
	for _, c := range cells {
		byID[c.ID] = c
		if _, dg := quicStreamsOf(c); dg && c.QoS != 0 {
			t.Errorf("%s: datagrams at QoS %d", c.ID, c.QoS)
		}
		if c.Topics != 10 || c.Messages != 1000 || c.Repetitions != 5 || c.Interval() != 100*time.Millisecond || !c.PubLink.OneDirection() {
			t.Errorf("%s: %+v", c.ID, c)
		}
	}
	const pre = "E9_cellular_loss10_egress_multi-topic_qos"
	for _, id := range []string{
		pre + "0_100B_every100ms_topics10_mqtts",
		pre + "1_100B_every100ms_topics10_quic_per-topic",
		pre + "0_100B_every100ms_topics10_large65536B-every2s_quic_dgram",
		pre + "0_100B_every100ms_topics10_large65536B-every2s_quic_per-topic_dgram",
		pre + "1_100B_every100ms_topics10_large65536B-every2s_mqtts",
	} {
		if _, ok := byID[id]; !ok {
			t.Errorf("no cell %s", id)
		}
	}
	c := byID[pre+"0_100B_every100ms_topics10_large65536B-every2s_quic_dgram"]
	if c.LargeSize != 65536 || c.LargeInterval() != 2*time.Second || strings.Join(multiTopicArgs(c).argv(), " ") != "--topics 10 --large-size 65536 --large-interval 2s" {
		t.Errorf("large cell %+v, args %v", c, multiTopicArgs(c))
	}
	if n := len(multiTopicSchedule(c, "x")); n != 10*1000+50 {
		t.Errorf("schedule of %d messages, want 10050", n)
	}
	// a datagram cell at 10 % loss: the stream and the grace per repetition
	if e := estimate(c); e < 515*time.Second || e > 530*time.Second {
		t.Errorf("estimate %s, want 5 x (100 s + 3 s grace) and a little", e)
	}
	if e := estimate(byID[pre+"1_100B_every100ms_topics10_mqtts"]); e < 500*time.Second || e > 505*time.Second {
		t.Errorf("estimate %s, want 5 x 100 s and a little", e)
	}
	red, err := specs[0].Scaled(ScaleReduced)
	if err != nil || red.Messages != 300 || red.Repetitions != 2 || red.Intervals[0] != ms(100) {
		t.Errorf("reduced: %v %+v", err, red)
	}
}

// TestMultiTopicRefused: the multi-topic fields where they do not belong,
// or malformed, are refused with the field and what to write.
func TestMultiTopicRefused(t *testing.T) {
	cases := []struct {
		name, src string
		want      []string
	}{
		{"topics without the pattern", "experiment: x\ntopics: 5\n", []string{"topics", "only for pattern multi-topic"}},
		{"large without the pattern", "experiment: x\nlarge_messages: [{size: 1000, interval: 1s}]\n", []string{"large_messages", "multi-topic"}},
		{"amqp", "experiment: x\npatterns: [multi-topic]\ntransports: [amqps]\nqos: [1]\n", []string{"transports[0]", "wildcard", "mqtts or quic"}},
		{"large interval missing", "experiment: x\npatterns: [multi-topic]\nlarge_messages: [{size: 65536}]\n", []string{"large_messages[0].interval", "size: 65536, interval: 2s"}},
		{"interval without size", "experiment: x\npatterns: [multi-topic]\nlarge_messages: [{size: 0, interval: 1s}]\n", []string{"large_messages[0]", "without a size"}},
		{"large too small", "experiment: x\npatterns: [multi-topic]\nlarge_messages: [{size: 8, interval: 1s}]\n", []string{"large_messages[0].size", "16 bytes"}},
		{"too many topics", "experiment: x\npatterns: [multi-topic]\ntopics: 5000\n", []string{"topics", "want 1 to 1000"}},
		{"datagrams without qos 0", "experiment: x\npatterns: [multi-topic]\nqos: [1]\nquic_datagrams: [false, true]\n", []string{"quic_datagrams", "add 0 to qos"}},
		{"twice", "experiment: x\npatterns: [multi-topic]\nlarge_messages: [{size: 0}, {size: 0}]\n", []string{"large_messages[1]", "twice"}},
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
	// the e9 shape as YAML: datagrams beside QoS 1 are fine for multi-topic,
	// and lab show's writer round-trips it
	src := "experiment: y\npatterns: [multi-topic]\nqos: [0, 1]\nquic_datagrams: [false, true]\nlarge_messages: [{size: 0}, {size: 65536, interval: 2s}]\n"
	specs, err := ParseSpecs("y.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	out, err := MarshalSpecs([]Spec{specs[0].Resolved()})
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseSpecs("again", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	c1, _ := Cells(specs)
	c2, _ := Cells(again)
	// per large choice: mqtts q0, q1; quic q0, q0 dgram, q1
	if len(c1) != 10 || len(c2) != len(c1) || !strings.Contains(string(out), "topics: 10") {
		t.Errorf("cells %v / %v\n%s", ids(c1), ids(c2), out)
	}
}

// TestMultiTopicLinkFabric runs a tiny E9 cell per transport variant
// through real namespaces and emulated links with the real broker, pub and
// sub: each cell delivers every message of the schedule, and messages.csv
// holds every periodic topic's and the large topic's messages.
func TestMultiTopicLinkFabric(t *testing.T) {
	testutil.RequireNetAdmin(t, needIP)
	if testing.Short() {
		t.Skip("builds iotq; skipped in -short mode")
	}
	bin := buildIOTQ(t)
	r, err := NewProcRunner(ProcOptions{IOTQ: bin, Fabric: LinkFabric{Prefix: "iotqe9-"}, NoPcap: true})
	if err != nil {
		t.Fatal(err)
	}
	s := Spec{Experiment: "e9t", Topology: TopologySpec{Kind: KindPubBrokerSub, Impaired: ImpairedPublisher, Directions: []string{DirectionEgress}},
		Profiles: []string{"lan"}, ProfileDefs: map[string]LinkSpec{"lan": {Rate: 100_000_000, Delay: ms(5)}},
		Transports: []string{TransportTLS, TransportQUIC}, QoS: []int{0}, Patterns: []string{PatternMultiTopic},
		Intervals: []Duration{ms(40)}, Topics: 3, LargeMessages: []LargeMessage{{Size: 20000, Interval: ms(100)}},
		QUICStreamStrategies: []string{"control", "per-topic"}, QUICDatagrams: []bool{false, true},
		Messages: 5, Repetitions: 1, Grace: ms(500)}
	// and at QoS 1 on a lossy link (5 %, both ends retransmitting): every
	// message still arrives
	lossy := s
	lossy.Experiment, lossy.Losses, lossy.QoS = "e9l", []Percent{5}, []int{1}
	lossy.QUICStreamStrategies, lossy.QUICDatagrams = []string{"per-topic"}, nil
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := Run(ctx, []Spec{s, lossy}, Options{Dir: dir, Runner: r})
	if err != nil {
		t.Fatal(err)
	}
	rows, _, err := records.ReadFile[records.CellRow](filepath.Join(dir, FileCells))
	if err != nil {
		t.Fatal(err)
	}
	// large at 3.3 and 103.3 ms of a 200 ms stream
	const perCell = 3*5 + 2
	if len(rows) != 7 || res.Failed != 0 {
		t.Fatalf("%d cells (want 5 without loss: mqtts, quic, quic dgram, per-topic, per-topic dgram; 2 with: mqtts, per-topic), %+v", len(rows), res)
	}
	for _, r := range rows {
		if r.Status != StatusOK || r.Published != perCell || r.Delivered != perCell || r.Topics != 3 || r.LargeSize != 20000 {
			t.Errorf("cell %s: %s published %d delivered %d topics %d large %d: %s", r.Cell, r.Status, r.Published, r.Delivered, r.Topics, r.LargeSize, r.Error)
		}
	}
	msgs, _, err := records.ReadFile[records.Message](filepath.Join(dir, FileMessages))
	if err != nil {
		t.Fatal(err)
	}
	perTopic := map[string]map[string]int{}
	for _, m := range msgs {
		if perTopic[m.Cell] == nil {
			perTopic[m.Cell] = map[string]int{}
		}
		if m.RecvNs > 0 && m.DelayNs > 0 {
			perTopic[m.Cell][m.Topic]++
		}
		if records.IsLargeTopic(m.Topic) != (m.Size == 20000) {
			t.Errorf("%s %s: a message of %d bytes", m.Cell, m.Topic, m.Size)
		}
	}
	for _, r := range rows {
		if r.LossPct > 0 {
			continue // checked above: QoS 1 delivered every message
		}
		got := perTopic[r.Cell]
		want := map[string]int{"lab/1/m/0": 5, "lab/1/m/1": 5, "lab/1/m/2": 5, "lab/1/m/large": 2}
		for tp, n := range want {
			if got[tp] != n {
				t.Errorf("%s: %s delivered %d, want %d (%v)", r.Cell, tp, got[tp], n, got)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: topics %v", r.Cell, got)
		}
	}
}
