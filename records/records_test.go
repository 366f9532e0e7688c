package records

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestRowKinds checks that every row type uses only the field kinds the
// CSV codec writes, and that no two columns share a name.
func TestRowKinds(t *testing.T) {
	check := func(name string, typ reflect.Type, header []string) {
		seen := map[string]bool{}
		for _, h := range header {
			if seen[h] || h == "" {
				t.Errorf("%s: column %q empty or twice", name, h)
			}
			seen[h] = true
		}
		for i := range typ.NumField() {
			switch k := typ.Field(i).Type.Kind(); k {
			case reflect.String, reflect.Bool, reflect.Int, reflect.Int64, reflect.Float64:
			default:
				t.Errorf("%s.%s: kind %s has no CSV form", name, typ.Field(i).Name, k)
			}
		}
	}
	check("PubRecord", reflect.TypeFor[PubRecord](), Header[PubRecord]())
	check("SubRecord", reflect.TypeFor[SubRecord](), Header[SubRecord]())
	check("Message", reflect.TypeFor[Message](), Header[Message]())
	check("Connection", reflect.TypeFor[Connection](), Header[Connection]())
	check("LinkCount", reflect.TypeFor[LinkCount](), Header[LinkCount]())
	check("CPU", reflect.TypeFor[CPU](), Header[CPU]())
	check("Completion", reflect.TypeFor[Completion](), Header[Completion]())
	check("CellRow", reflect.TypeFor[CellRow](), Header[CellRow]())
}

// TestVersion0Headers pins the columns that results directories written
// before package records existed carry (docs/records.md, version 0): this
// version writes them in the same order, with the columns version 2 added.
func TestVersion0Headers(t *testing.T) {
	want := map[string]string{
		"pub":         "seq,size,send_ns,accepted_ns,ok,error",
		"sub":         "seq,size,send_ns,recv_ns,delay_ns,topic,qos,duplicate",
		"messages":    "cell,rep,protocol,transport,qos,seq,size,send_ns,recv_ns,delay_ns,node,topic",
		"connections": "cell,rep,role,node,transport,dial_start_ns,transport_ready_ns,connack_ns,first_delivery_ns,resumed,used_0rtt",
		"links":       "cell,rep,link,direction,packets,bytes,drop_random,drop_queue,drop_retries,drop_down",
		"cpu":         "cell,rep,node,role,user_ns,sys_ns",
		"completions": "cell,rep,transport,start_ns,end_ns,completion_ns,delivered,published",
		"cells": "cell,experiment,profile,loss_pct,transport,qos,pattern,size,interval_ns,messages,repetitions,topology," +
			"publishers,retries,delay_convention,pub_link,pub_rate_bps,pub_delay_ns,sub_link,sub_rate_bps,sub_delay_ns," +
			"path_delay_ns,tcp_congestion,seed,published,delivered,reps_ok,status,error,start_ns,end_ns",
	}
	got := map[string][]string{
		"pub": Header[PubRecord](), "sub": Header[SubRecord](), "messages": Header[Message](),
		"connections": Header[Connection](), "links": Header[LinkCount](), "cpu": Header[CPU](),
		"completions": Header[Completion](), "cells": Header[CellRow](),
	}
	// version 2: accepted_ns appended to messages, protocol after transport in cells
	want["messages"] += ",accepted_ns,echo_ns"
	want["cells"] = strings.Replace(want["cells"], ",transport,", ",transport,protocol,", 1)
	// version 3: the broker's QUIC 0-RTT policy and the early message's send time appended
	want["cells"] = strings.Replace(want["cells"], ",protocol,", ",protocol,quic_0rtt,", 1)
	want["connections"] += ",early_sent_ns"
	// version 5: the QUIC stream strategy of connections and cells
	want["connections"] += ",quic_stream_strategy,quic_datagrams"
	want["cells"] = strings.Replace(want["cells"], ",quic_0rtt,", ",quic_0rtt,quic_streams,", 1)
	// version 6: the rebinding NAT's drops (E10), a reconnecting publisher's reconnections
	want["links"] += ",drop_nat"
	want["connections"] += ",reconnects"
	// version 7: pattern multi-topic's topic per published message, its topics and large topic per cell
	want["pub"] += ",topic"
	want["cells"] += ",topics,large_size,large_interval_ns"
	// version 8: when each paced message was ready to leave
	want["pub"] += ",ready_ns"
	for k, w := range want {
		if g := strings.Join(got[k], ","); g != w {
			t.Errorf("%s header\n got %s\nwant %s", k, g, w)
		}
	}
}

// TestReadVersion0NodeFiles reads files that iotq pub, sub and broker wrote
// before package records existed (testdata/v0).
func TestReadVersion0NodeFiles(t *testing.T) {
	pubs, _, err := ReadFile[PubRecord](filepath.Join("testdata", "v0", "pub.csv"))
	if err != nil || len(pubs) != 1 {
		t.Fatalf("pub.csv: %v %+v", err, pubs)
	}
	if p := pubs[0]; !p.OK || p.Size != 32 || p.SendNs != 1795439926892454321 || p.AcceptedNs != 1795439926919635379 {
		t.Errorf("pub record %+v", p)
	}
	subs, _, err := ReadFile[SubRecord](filepath.Join("testdata", "v0", "sub.csv"))
	if err != nil || len(subs) != 2 {
		t.Fatalf("sub.csv: %v %+v", err, subs)
	}
	if s := subs[1]; s.Topic != "lab/1/2" || s.QoS != 1 || s.DelayNs != 26770589 || s.Duplicate {
		t.Errorf("sub record %+v", s)
	}
	cs, ok := ReadConnectionStats(filepath.Join("testdata", "v0", "pub.stdout"))
	if !ok || cs.Transport != "quic" || cs.DialStartNs != 1795439926834737400 || cs.ConnackNs != 1795439926892356600 || cs.ClientID != "lab-pub-1" {
		t.Errorf("pub stats %v %+v", ok, cs)
	}
	b, err := os.ReadFile(filepath.Join("testdata", "v0", "broker.ready.json"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseBrokerReady(b)
	if err != nil || r.Listeners[0] != "quic://0.0.0.0:14567" || r.PID != 15968 || !strings.HasSuffix(r.CAFile, "ca.pem") {
		t.Errorf("ready %v %+v", err, r)
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter[Message](&buf)
	if err != nil {
		t.Fatal(err)
	}
	in := []Message{
		{Cell: "c", Rep: 1, Protocol: "mqtt", Transport: "quic", QoS: 1, Seq: 7, Size: 32, SendNs: 10, RecvNs: 20, DelayNs: 10, Node: "pub", Topic: "a,b"},
		{Cell: "c", Rep: 1, Seq: 8, SendNs: 11}, // never arrived: empty recv_ns and delay_ns
	}
	for _, m := range in {
		if err := w.Write(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "\nc,1,,,0,8,0,11,,,,,,\n") {
		t.Errorf("zero times are not written empty:\n%s", buf.String())
	}
	out, h, err := Read[Message](&buf)
	if err != nil || !reflect.DeepEqual(out, in) || len(h) != len(Header[Message]()) {
		t.Errorf("round trip: %v\n got %+v\nwant %+v", err, out, in)
	}
	// columns are found by name, unknown ones ignored, missing ones zero
	out2, _, err := Read[Message](strings.NewReader("\ufeffextra,SEQ,cell\nx,5,c\n"))
	if err != nil || len(out2) != 1 || out2[0].Seq != 5 || out2[0].Cell != "c" || out2[0].SendNs != 0 {
		t.Errorf("by name: %v %+v", err, out2)
	}
	if _, _, err := Read[Message](strings.NewReader("")); err != ErrNoHeader {
		t.Errorf("empty file: %v", err)
	}
	rows, _, err := Read[Message](strings.NewReader("cell,seq\nc,1\n\"broken\n"))
	if err == nil || len(rows) != 1 {
		t.Errorf("a malformed line returns the rows before it and an error: %v %+v", err, rows)
	}
}

func TestSummarizeDelaysType7(t *testing.T) {
	d := SummarizeDelays([]float64{4, 1, 3, 2})
	// type 7: h = (n-1)p = 1.5 for the median, 2.85 for p95
	if d.N != 4 || d.P50Ms != 2.5 || d.P95Ms < 3.849 || d.P95Ms > 3.851 || d.MinMs != 1 || d.MaxMs != 4 || d.MeanMs != 2.5 {
		t.Errorf("%+v", d)
	}
	if one := SummarizeDelays([]float64{7}); one.SdMs != 0 || one.P99Ms != 7 {
		t.Errorf("one value: %+v", one)
	}
}

func TestServerReadyRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ready.json")
	if err := WriteServerReady(path, []string{"quic://127.0.0.1:14567"}, "/s/ca.pem"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseBrokerReady(b)
	if err != nil || r.Listeners[0] != "quic://127.0.0.1:14567" || r.CAFile != "/s/ca.pem" || r.PID != os.Getpid() {
		t.Errorf("ready %v %+v", err, r)
	}
	if err := WriteServerReady(filepath.Join(path, "no", "dir"), []string{"x"}, ""); err == nil || !strings.Contains(err.Error(), "ready file") {
		t.Errorf("unwritable ready file: %v", err)
	}
}

// TestStreamStrategyOr: a QUIC connection row from before version 5 reads
// as one stream (control); other transports have no strategy.
func TestStreamStrategyOr(t *testing.T) {
	for _, c := range []struct {
		row  Connection
		want string
	}{
		{Connection{Transport: "quic"}, "control"},
		{Connection{Transport: "quic", QUICStreamStrategy: "per-topic"}, "per-topic"},
		{Connection{Transport: "mqtt"}, ""},
	} {
		if got := c.row.StreamStrategyOr(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.row, got, c.want)
		}
	}
}
