package lab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// pubRecord is one row of `iotq pub --records`.
type pubRecord struct {
	Seq        int64
	Size       int
	SendNs     int64
	AcceptedNs int64
	OK         bool
	Err        string
}

// subRecord is one row of `iotq sub --records`.
type subRecord struct {
	Seq       int64
	Size      int
	SendNs    int64
	RecvNs    int64
	DelayNs   int64
	Topic     string
	QoS       int
	Duplicate bool
}

// colIndex maps header names to positions.
type colIndex map[string]int

func (ci colIndex) get(row []string, name string) string {
	i, ok := ci[name]
	if !ok || i >= len(row) {
		return ""
	}
	return strings.TrimSpace(row[i])
}

func (ci colIndex) int64(row []string, name string) int64 {
	v, _ := strconv.ParseInt(ci.get(row, name), 10, 64)
	return v
}

func (ci colIndex) bool(row []string, name string) bool {
	switch strings.ToLower(ci.get(row, name)) {
	case "1", "true", "yes", "t":
		return true
	}
	return false
}

func indexHeader(h []string) colIndex {
	ci := colIndex{}
	for i, n := range h {
		ci[strings.TrimSpace(strings.TrimPrefix(n, "\ufeff"))] = i
	}
	return ci
}

func readPubRecords(path string) ([]pubRecord, error) {
	h, rows, err := readCSV(path)
	if err != nil || h == nil {
		return nil, err
	}
	ci := indexHeader(h)
	var out []pubRecord
	for _, r := range rows {
		ok := true
		if _, has := ci["ok"]; has {
			ok = ci.bool(r, "ok")
		}
		out = append(out, pubRecord{Seq: ci.int64(r, "seq"), Size: int(ci.int64(r, "size")), SendNs: ci.int64(r, "send_ns"),
			AcceptedNs: ci.int64(r, "accepted_ns"), OK: ok, Err: ci.get(r, "error")})
	}
	return out, nil
}

func readSubRecords(path string) ([]subRecord, error) {
	h, rows, err := readCSV(path)
	if err != nil || h == nil {
		return nil, err
	}
	ci := indexHeader(h)
	var out []subRecord
	for _, r := range rows {
		out = append(out, subRecord{Seq: ci.int64(r, "seq"), Size: int(ci.int64(r, "size")), SendNs: ci.int64(r, "send_ns"),
			RecvNs: ci.int64(r, "recv_ns"), DelayNs: ci.int64(r, "delay_ns"), Topic: ci.get(r, "topic"),
			QoS: int(ci.int64(r, "qos")), Duplicate: ci.bool(r, "duplicate")})
	}
	return out, nil
}

// connStats is the connection part of `--stats json`.
type connStats struct {
	Transport        string `json:"transport"`
	Used0RTT         bool   `json:"used_0rtt"`
	TLSResumed       bool   `json:"tls_resumed"`
	DialStartNs      int64  `json:"dial_start_ns"`
	TransportReadyNs int64  `json:"transport_ready_ns"`
	ConnackNs        int64  `json:"connack_ns"`
}

// readStats extracts the stats JSON object from a process's stdout, which
// may also hold notification lines ("recv SEQ"). The connection fields
// are read from a "connection" object, or from the top level.
func readStats(path string) (connStats, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return connStats{}, false
	}
	var keep [][]byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if bytes.HasPrefix(bytes.TrimSpace(line), []byte("recv ")) {
			continue
		}
		keep = append(keep, line)
	}
	b = bytes.Join(keep, []byte("\n"))
	i := bytes.IndexByte(b, '{')
	if i < 0 {
		return connStats{}, false
	}
	dec := json.NewDecoder(bytes.NewReader(b[i:]))
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return connStats{}, false
	}
	var cs connStats
	src := b[i:]
	if c, ok := raw["connection"]; ok {
		src = c
	}
	if err := json.Unmarshal(src, &cs); err != nil {
		return connStats{}, false
	}
	return cs, true
}

// firstReceipt of each distinct sequence number (per topic).
type receiptKey struct {
	topic string
	seq   int64
}

func firstReceipts(subs []subRecord) map[receiptKey]subRecord {
	m := map[receiptKey]subRecord{}
	for _, s := range subs {
		k := receiptKey{s.Topic, s.Seq}
		if cur, ok := m[k]; !ok || s.RecvNs < cur.RecvNs {
			m[k] = s
		}
	}
	return m
}

func b2s(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func nsOrEmpty(v int64) string {
	if v == 0 {
		return ""
	}
	return strconv.FormatInt(v, 10)
}

// cellWriters hold a cell's record files while it runs.
type cellWriters struct {
	messages, connections, links, cpu, completions *csvFile
}

func openCellWriters(dir string) (*cellWriters, error) {
	w := &cellWriters{}
	var err error
	open := func(name string, h []string) *csvFile {
		if err != nil {
			return nil
		}
		var f *csvFile
		f, err = createCSV(dir+"/"+name, h)
		return f
	}
	w.messages = open(FileMessages, HeaderMessages)
	w.connections = open(FileConnections, HeaderConnections)
	w.links = open(FileLinks, HeaderLinks)
	w.cpu = open(FileCPU, HeaderCPU)
	w.completions = open(FileCompletions, HeaderCompletions)
	if err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

func (w *cellWriters) close() error {
	var first error
	for _, f := range []*csvFile{w.messages, w.connections, w.links, w.cpu, w.completions} {
		if f == nil {
			continue
		}
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return fmt.Errorf("record files: %w", first)
	}
	return nil
}
