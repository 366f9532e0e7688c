package lab

import (
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iotq/iotq/records"
)

// quicStreamsSpec sweeps every stream strategy and both datagram choices
// over MQTT over TCP+TLS and QUIC at QoS 0.
func quicStreamsSpec() Spec {
	s := fakeSpec(PatternPeriodic)
	s.Experiment = "qs"
	s.QoS = []int{0}
	s.Transports = []string{TransportTLS, TransportQUIC}
	s.QUICStreamStrategies = []string{"control", "per-topic", "per-publish"}
	s.QUICDatagrams = []bool{false, true}
	return s
}

// TestQUICStreamStrategiesExpand: the strategies and datagram choices
// multiply the MQTT over QUIC cells only, name themselves in the id only
// when not the default, and become the clients' flags.
func TestQUICStreamStrategiesExpand(t *testing.T) {
	cells, err := Cells([]Spec{quicStreamsSpec()})
	if err != nil {
		t.Fatal(err)
	}
	const base = "qs_ethernet_loss0_periodic_qos0_100B_every5ms_"
	want := []struct{ id, streams, args string }{
		{base + "mqtts", "", ""},
		{base + "quic", "control", ""},
		{base + "quic_dgram", "control+datagrams", "--quic-datagrams"},
		{base + "quic_per-topic", "per-topic", "--quic-stream-strategy per-topic"},
		{base + "quic_per-topic_dgram", "per-topic+datagrams", "--quic-stream-strategy per-topic --quic-datagrams"},
		{base + "quic_per-publish", "per-publish", "--quic-stream-strategy per-publish"},
		{base + "quic_per-publish_dgram", "per-publish+datagrams", "--quic-stream-strategy per-publish --quic-datagrams"},
	}
	if len(cells) != len(want) {
		t.Fatalf("%d cells, want %d: %v", len(cells), len(want), ids(cells))
	}
	for i, w := range want {
		c := cells[i]
		if c.ID != w.id || c.QUICStreams != w.streams || strings.Join(quicClientArgs(c).argv(), " ") != w.args {
			t.Errorf("cell %d: %s streams %q args %q; want %s %q %q", i, c.ID, c.QUICStreams, quicClientArgs(c).argv(), w.id, w.streams, w.args)
		}
	}

	// The defaults written out give the cells (ids, seeds, everything) of
	// a spec that leaves the fields out.
	plain := fakeSpec(PatternPeriodic)
	plain.Transports = []string{TransportTLS, TransportQUIC}
	explicit := plain
	explicit.QUICStreamStrategies = []string{"control"}
	explicit.QUICDatagrams = []bool{false}
	a, err := Cells([]Spec{plain})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Cells([]Spec{explicit})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("explicit defaults change the cells:\n%v\n%v", ids(a), ids(b))
	}
	if got := ids(a); !slices.Equal(got, []string{"fake_ethernet_loss0_periodic_qos1_100B_every5ms_mqtts", "fake_ethernet_loss0_periodic_qos1_100B_every5ms_quic"}) {
		t.Errorf("default ids %v", got)
	}

	// The YAML names, and a round trip through lab show's writer.
	src := "experiment: y\ntransports: [quic]\nquic_stream_strategies: [per-publish]\nquic_datagrams: [true]\n"
	specs, err := ParseSpecs("y.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	out, err := MarshalSpecs([]Spec{specs[0].Resolved()})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"quic_stream_strategies: [per-publish]", "quic_datagrams: [true]"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("resolved spec lacks %q:\n%s", w, out)
		}
	}
	again, err := ParseSpecs("again", out)
	if err != nil {
		t.Fatal(err)
	}
	c1, _ := Cells(specs)
	c2, _ := Cells(again)
	if !reflect.DeepEqual(c1, c2) || len(c1) != 1 || c1[0].ID != "y_wifi_loss0_periodic_qos0_100B_every1s_quic_per-publish_dgram" {
		t.Errorf("round trip: %v vs %v", ids(c1), ids(c2))
	}
}

func ids(cells []Cell) []string {
	var out []string
	for _, c := range cells {
		out = append(out, c.ID)
	}
	return out
}

// TestQUICStreamStrategiesRefused: an unknown strategy, datagrams beside a
// QoS above 0, a value listed twice and a failover sweep are refused with
// the field and what to do.
func TestQUICStreamStrategiesRefused(t *testing.T) {
	cases := []struct {
		name string
		src  string
		want []string
	}{
		{"unknown strategy", "experiment: x\nquic_stream_strategies: [control, per-stream]\n", []string{"x.yaml:2", "quic_stream_strategies[1]", `"per-stream"`, "control, per-topic or per-publish"}},
		{"datagrams with qos 1", "experiment: x\nqos: [0, 1]\nquic_datagrams: [false, true]\n", []string{"quic_datagrams[1]", "QoS 1", "qos: [0]"}},
		{"strategy twice", "experiment: x\nquic_stream_strategies: [per-topic, per-topic]\n", []string{"quic_stream_strategies[1]", "twice"}},
		{"datagrams twice", "experiment: x\nquic_datagrams: [true, true]\n", []string{"quic_datagrams[1]", "twice"}},
		{"failover", "experiment: x\npatterns: [failover]\nqos: [1]\nquic_stream_strategies: [per-topic]\n", []string{"quic_stream_strategies", "failover"}},
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
	ok := "experiment: x\nqos: [0]\nquic_stream_strategies: [control, per-topic, per-publish]\nquic_datagrams: [false, true]\n"
	if _, err := ParseSpecs("x.yaml", []byte(ok)); err != nil {
		t.Errorf("refused a good sweep: %v", err)
	}
}

// TestQUICStreamStrategiesLocalFabric runs real broker, pub and sub on
// loopback: each MQTT over QUIC cell's clients report the strategy and
// datagrams the cell asked for (connections.csv, from their --stats json),
// cells.csv names it, and the TCP cell has none.
func TestQUICStreamStrategiesLocalFabric(t *testing.T) {
	if testing.Short() {
		t.Skip("builds iotq; skipped in -short mode")
	}
	bin := buildIOTQ(t)
	r, err := NewProcRunner(ProcOptions{IOTQ: bin, Fabric: LocalFabric{}, NoPcap: true})
	if err != nil {
		t.Fatal(err)
	}
	s := quicStreamsSpec()
	s.QUICStreamStrategies = []string{"control", "per-topic"}
	s.Messages, s.Repetitions = 5, 1
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Run(ctx, []Spec{s}, Options{Dir: dir, Runner: r})
	if err != nil {
		t.Fatal(err)
	}
	rows, _, err := records.ReadFile[records.CellRow](filepath.Join(dir, FileCells))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 5 || res.Failed != 0 {
		t.Fatalf("%d cells, %+v", len(rows), res)
	}
	streams := map[string]string{}
	for _, r := range rows {
		if r.Status != StatusOK || r.Published != r.Delivered || r.Published == 0 {
			t.Errorf("cell %s: %s published %d delivered %d: %s", r.Cell, r.Status, r.Published, r.Delivered, r.Error)
		}
		streams[r.Cell] = r.QUICStreams
	}
	const base = "qs_ethernet_loss0_periodic_qos0_100B_every5ms_"
	wantStreams := map[string]string{base + "mqtts": "", base + "quic": "control", base + "quic_dgram": "control+datagrams",
		base + "quic_per-topic": "per-topic", base + "quic_per-topic_dgram": "per-topic+datagrams"}
	if !reflect.DeepEqual(streams, wantStreams) {
		t.Errorf("cells.csv quic_streams %v, want %v", streams, wantStreams)
	}
	conns, _, err := records.ReadFile[records.Connection](filepath.Join(dir, FileConnections))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, c := range conns {
		strategy, dg := strings.CutSuffix(wantStreams[c.Cell], datagramsSuffix)
		if c.QUICStreamStrategy != strategy || c.QUICDatagrams != dg {
			t.Errorf("%s %s: quic_stream_strategy %q datagrams %v, want %q %v", c.Cell, c.Role, c.QUICStreamStrategy, c.QUICDatagrams, strategy, dg)
		}
		seen[c.Cell]++
	}
	for id := range wantStreams {
		if seen[id] != 2 { // the publisher and the subscriber
			t.Errorf("%s: %d connection rows, want 2", id, seen[id])
		}
	}
}
