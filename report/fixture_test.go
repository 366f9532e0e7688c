package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/report/pcap"
)

// The fixture is a small synthetic results directory in the layout of
// docs/records.md: two profiles (wifi, cellular), loss 0 and 5 %, mqtts and
// quic, QoS 0 and 1 (E1, periodic), pattern A (E4, stop-and-wait) and
// pattern B (E5, reconnect). Values are drawn from a fixed-seed generator,
// so the fixture is the same on every run.

const fixT0 = int64(1_700_000_000_000_000_000)

type fixCell struct {
	id, exp, profile, transport, pattern string
	loss                                 float64
	qos, size, messages, reps            int
	pubDelay, subDelay                   int64
	pubRate, subRate                     float64
}

// fixStartup holds the startup latencies written for pattern B cells, by
// cell and repetition, so tests can check the join.
type fixture struct {
	cells   []fixCell
	startup map[string][]float64 // ms per rep
	lost    map[string]int       // messages never received, per cell
}

type csvFile struct {
	w *csv.Writer
	f *os.File
}

func newCSV(t testing.TB, dir, name string, head ...string) *csvFile {
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	w := csv.NewWriter(f)
	w.Write(head)
	return &csvFile{w, f}
}

func (c *csvFile) row(vals ...any) {
	s := make([]string, len(vals))
	for i, v := range vals {
		s[i] = fmt.Sprint(v)
	}
	c.w.Write(s)
}

func (c *csvFile) close(t testing.TB) {
	c.w.Flush()
	if err := c.w.Error(); err != nil {
		t.Fatal(err)
	}
	if err := c.f.Close(); err != nil {
		t.Fatal(err)
	}
}

func writeFixture(t testing.TB, dir string) *fixture {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	fx := &fixture{startup: map[string][]float64{}, lost: map[string]int{}}
	profiles := []struct {
		name    string
		rate    float64
		delayNs int64
	}{{"wifi", 20e6, 25e6}, {"cellular", 10e6, 100e6}}
	transports := []string{"mqtts", "quic"}
	for _, p := range profiles {
		for _, l := range []float64{0, 5} {
			for _, q := range []int{0, 1} {
				for _, tr := range transports {
					fx.cells = append(fx.cells, fixCell{
						id:  fmt.Sprintf("E1_%s_loss%g_periodic_qos%d_100B_every1s_%s", p.name, l, q, tr),
						exp: "E1", profile: p.name, transport: tr, pattern: "periodic", loss: l, qos: q, size: 100,
						messages: 20, reps: 1, pubDelay: p.delayNs, subDelay: 0, pubRate: p.rate, subRate: 100e6})
				}
			}
		}
	}
	for _, l := range []float64{0, 5} {
		for _, tr := range transports {
			fx.cells = append(fx.cells, fixCell{
				id:  fmt.Sprintf("E4_wifi_loss%g_stop-and-wait_qos1_10B_%s", l, tr),
				exp: "E4", profile: "wifi", transport: tr, pattern: "stop-and-wait", loss: l, qos: 1, size: 10,
				messages: 10, reps: 5, pubDelay: 12_500_000, subDelay: 12_500_000, pubRate: 20e6, subRate: 20e6})
			fx.cells = append(fx.cells, fixCell{
				id:  fmt.Sprintf("E5_wifi_loss%g_reconnect_qos1_10B_%s", l, tr),
				exp: "E5", profile: "wifi", transport: tr, pattern: "reconnect", loss: l, qos: 1, size: 10,
				messages: 1, reps: 5, pubDelay: 12_500_000, subDelay: 12_500_000, pubRate: 20e6, subRate: 20e6})
		}
	}

	manifest := map[string]any{"iotq_version": "v0.0.0-test", "go_version": "go1.26.0", "quic_go_version": "v0.65.0",
		"kernel": "6.1.0-test", "tcp_congestion": "cubic", "quic_congestion": "newreno", "seed": 1,
		"loadavg": "0.10 0.20 0.30", "start_ns": fixT0, "out_dir": "/tmp/somewhere",
		"tool": map[string]any{"iotq_commit": "abc123"}, "host": map[string]any{"kernel": "6.1.0-test", "cpus": 2}}
	var exps []any
	for _, e := range []string{"E1", "E4", "E5"} {
		exps = append(exps, map[string]any{"name": e, "seed": 1, "energy": map[string]any{
			"cpu_active_mw": 2000,
			"radio":         map[string]any{"satellite": map[string]any{"active_base_mw": 25000, "idle_mw": 12000, "tail_ms": 500}},
		}})
	}
	manifest["experiments"] = exps
	b, _ := json.MarshalIndent(manifest, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	cellsF := newCSV(t, dir, "cells.csv", "cell", "experiment", "profile", "loss_pct", "transport", "qos", "pattern", "size",
		"interval_ns", "publishers", "messages", "repetitions", "pub_delay_ns", "pub_rate_bps", "sub_delay_ns", "sub_rate_bps", "status", "error")
	msgF := newCSV(t, dir, "messages.csv", "cell", "rep", "protocol", "transport", "qos", "seq", "size", "send_ns", "recv_ns", "delay_ns", "node", "topic")
	connF := newCSV(t, dir, "connections.csv", "cell", "rep", "role", "node", "transport", "dial_start_ns", "transport_ready_ns",
		"connack_ns", "first_delivery_ns", "resumed", "used_0rtt")
	linkF := newCSV(t, dir, "links.csv", "cell", "rep", "link", "direction", "packets", "bytes", "drop_random", "drop_queue", "drop_retries", "drop_down")
	cpuF := newCSV(t, dir, "cpu.csv", "cell", "rep", "node", "role", "user_ns", "sys_ns")
	compF := newCSV(t, dir, "completions.csv", "cell", "rep", "transport", "start_ns", "end_ns", "completion_ns", "delivered", "published")

	clock := fixT0
	for _, c := range fx.cells {
		interval := 0
		if c.pattern == "periodic" {
			interval = 1_000_000_000
		}
		cellsF.row(c.id, c.exp, c.profile, c.loss, c.transport, c.qos, c.pattern, c.size, interval, 1, c.messages, c.reps,
			c.pubDelay, int64(c.pubRate), c.subDelay, int64(c.subRate), "done", "")
		quic := c.transport == "quic"
		rtt := 2 * (c.pubDelay + c.subDelay)
		ser := int64(float64(c.size*8)/c.pubRate*1e9) + int64(float64(c.size*8)/c.subRate*1e9)
		var pkts []pktRec
		for rep := 0; rep < c.reps; rep++ {
			clock += 10_000_000_000
			hs := int64(2)
			if quic {
				hs = 1
			}
			dial := clock
			connF.row(c.id, rep, "sub", "sub", c.transport, dial-500_000_000, dial-500_000_000+hs*2*c.subDelay, dial-500_000_000+(hs+1)*2*c.subDelay, 0, false, false)
			connF.row(c.id, rep, "pub", "pub", c.transport, dial, dial+hs*2*c.pubDelay, dial+(hs+1)*2*c.pubDelay, 0, false, false)
			start := dial + (hs+1)*2*c.pubDelay
			var up, down, upB, downB int64
			addPkt := func(at int64, n int, isUp bool) {
				pkts = append(pkts, pktRec{at, n, isUp})
				if isUp {
					up++
					upB += int64(n)
				} else {
					down++
					downB += int64(n)
				}
			}
			for i := 0; i < 4; i++ { // handshake packets
				addPkt(dial+int64(i)*c.pubDelay, 300, i%2 == 0)
			}
			send := start
			delivered := 0
			var last int64
			switch c.pattern {
			case "periodic", "stop-and-wait":
				for seq := 0; seq < c.messages; seq++ {
					base := c.pubDelay + c.subDelay + ser
					noise := int64(rng.ExpFloat64() * 2e6)
					if quic {
						noise = int64(rng.ExpFloat64() * 1.5e6)
					}
					lostOnce := rng.Float64()*100 < c.loss
					recv := send + base + noise
					received := true
					if lostOnce {
						if c.qos == 0 {
							received = false
						} else if quic {
							recv += rtt + rtt/2
						} else {
							recv += 200_000_000 + rtt
						}
					}
					addPkt(send, c.size+60, true)
					if c.qos > 0 {
						addPkt(send+2*c.pubDelay, 60, false)
					}
					if received {
						delivered++
						msgF.row(c.id, rep, "mqtt", c.transport, c.qos, seq, c.size, send, recv, recv-send, "pub", "lab/"+c.id)
						last = recv
					} else {
						fx.lost[c.id]++
						msgF.row(c.id, rep, "mqtt", c.transport, c.qos, seq, c.size, send, "", "", "pub", "lab/"+c.id)
					}
					if c.pattern == "periodic" {
						send += 1_000_000_000
					} else {
						send = recv + 1_000_000
					}
				}
				if c.pattern == "stop-and-wait" {
					compF.row(c.id, rep, c.transport, start, last, last-start, delivered, c.messages)
				}
			case "reconnect":
				// first connection publishes seq 0
				recv0 := start + c.pubDelay + c.subDelay + ser + 1_000_000
				msgF.row(c.id, rep, "mqtt", c.transport, c.qos, 0, c.size, start, recv0, recv0-start, "pub", "lab/"+c.id+"/1")
				addPkt(start, c.size+60, true)
				// second connection: dial, resumption (0-RTT for QUIC);
				// the PUBLISH leaves once CONNACK is in: TCP+TLS after
				// 3 round trips (TCP, TLS, CONNECT), QUIC 0-RTT after 1
				dial2 := recv0 + 500_000_000
				hs2 := int64(3)
				if quic {
					hs2 = 1
				}
				connF.row(c.id, rep, "pub-resume", "pub", c.transport, dial2, dial2+(hs2-1)*2*c.pubDelay, dial2+hs2*2*c.pubDelay, 0, true, quic)
				lat := hs2*2*c.pubDelay + c.pubDelay + c.subDelay + int64(rep+1)*1_000_000
				if c.loss > 0 && rep == 2 {
					lat += 200_000_000 // one handshake packet lost
				}
				send2 := dial2 + hs2*2*c.pubDelay
				msgF.row(c.id, rep, "mqtt", c.transport, c.qos, 1, c.size, send2, dial2+lat, dial2+lat-send2, "pub", "lab/"+c.id+"/2")
				fx.startup[c.id] = append(fx.startup[c.id], float64(lat)/1e6)
				addPkt(dial2, 300, true)
				addPkt(send2, c.size+60, true)
				delivered = 2
				last = dial2 + lat
			}
			// the loss hits what the publisher sends, so what it
			// receives stays at most what was sent towards it
			linkF.row(c.id, rep, "pub", "pub->broker", up, upB, int(c.loss), 0, 0, 0)
			linkF.row(c.id, rep, "pub", "broker->pub", down, downB, 0, 0, 0, 0)
			linkF.row(c.id, rep, "sub", "broker->sub", down, downB, 0, 0, 0, 0)
			linkF.row(c.id, rep, "sub", "sub->broker", up, upB, 0, 0, 0, 0)
			cpuMul := int64(3)
			if quic {
				cpuMul = 5
			}
			cpuF.row(c.id, rep, "pub", "pub", cpuMul*int64(c.messages)*1_000_000, int64(c.messages)*500_000)
			cpuF.row(c.id, rep, "broker", "broker", 40_000_000, 10_000_000)
			cpuF.row(c.id, rep, "sub", "sub", 20_000_000, 5_000_000)
			clock = max(clock, last)
		}
		if c.exp == "E1" && c.loss == 0 && c.qos == 0 && c.profile == "wifi" {
			writePcap(t, filepath.Join(dir, "cells", c.id), pkts)
		}
		if err := os.MkdirAll(filepath.Join(dir, "cells", c.id), 0o755); err != nil {
			t.Fatal(err)
		}
		// the lab's done marker: the cell's parameters (read when cells.csv is missing)
		done, _ := json.Marshal(records.Done{Status: records.StatusOK, Cell: records.Cell{ID: c.id, Experiment: c.exp,
			Profile: c.profile, LossPct: c.loss, Transport: c.transport, QoS: c.qos, Size: c.size, Pattern: c.pattern,
			Messages: c.messages, Repetitions: c.reps, Publishers: 1,
			PubLink: records.LinkParams{Name: c.profile, DelayNs: c.pubDelay, RateBps: int64(c.pubRate)},
			SubLink: records.LinkParams{DelayNs: c.subDelay, RateBps: int64(c.subRate)}}})
		os.WriteFile(filepath.Join(dir, "cells", c.id, "done.json"), done, 0o644)
	}
	for _, f := range []*csvFile{cellsF, msgF, connF, linkF, cpuF, compF} {
		f.close(t)
	}
	return fx
}

type pktRec struct {
	at int64
	n  int
	up bool
}

func writePcap(t testing.TB, dir string, pkts []pktRec) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "pub.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := pcap.NewWriter(f)
	if err != nil {
		t.Fatal(err)
	}
	pub, broker := netip.MustParseAddr("10.77.0.2"), netip.MustParseAddr("10.77.0.1")
	for _, p := range pkts {
		src, dst := pub, broker
		if !p.up {
			src, dst = broker, pub
		}
		sport, dport := uint16(40001), uint16(8883)
		if !p.up {
			sport, dport = dport, sport
		}
		if err := w.WritePacket(p.at, pcap.IPv4Packet(src, dst, 17, sport, dport, p.n)); err != nil {
			t.Fatal(err)
		}
	}
}

func approx(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

var _ = strconv.Itoa

func fmtInt(v int64) string { return strconv.FormatInt(v, 10) }
