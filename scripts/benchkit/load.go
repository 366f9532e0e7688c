package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// cmdGen writes -n lines of -size bytes (plus a newline) to standard
// output: 19 digits of the Unix time in nanoseconds at which the line was
// written, a space, then 'x' padding. mosquitto_pub -l sends each line as
// one message (without the newline), so the payload is -size bytes.
func cmdGen(args []string) error {
	fs := flag.NewFlagSet("gen", flag.ContinueOnError)
	n := fs.Int("n", 10000, "number of lines (messages)")
	size := fs.Int("size", 100, "payload bytes per line (at least 20)")
	rate := fs.Float64("rate", 0, "lines per second; 0 writes as fast as the pipe takes them")
	delay := fs.Duration("delay", 0, "wait this long before the first line (lets the publisher connect first)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	time.Sleep(*delay)
	if *size < 20 {
		return fmt.Errorf("-size %d: at least 20 bytes are needed for the timestamp", *size)
	}
	out := bufio.NewWriterSize(os.Stdout, 16<<10)
	line := make([]byte, *size+1)
	for i := range line {
		line[i] = 'x'
	}
	line[19] = ' '
	line[*size] = '\n'
	start := time.Now()
	for i := 0; i < *n; i++ {
		if *rate > 0 {
			due := start.Add(time.Duration(float64(i) / *rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				if err := out.Flush(); err != nil {
					return err
				}
				time.Sleep(d)
			}
		}
		ts := strconv.AppendInt(line[:0], time.Now().UnixNano(), 10)
		if len(ts) != 19 {
			return errors.New("clock out of the 19-digit nanosecond range")
		}
		if _, err := out.Write(line); err != nil {
			return err
		}
	}
	return out.Flush()
}

// LatResult is what lat prints (JSON): the messages counted in the
// subscribers' files and the one-way latency of those that carried a
// send timestamp (nearest-rank percentiles, microseconds).
type LatResult struct {
	Files        int     `json:"files"`
	Received     int     `json:"received"`
	MinPerFile   int     `json:"min_per_file"`
	Samples      int     `json:"latency_samples"`
	FirstSentNs  int64   `json:"first_sent_ns"`
	LastRecvNs   int64   `json:"last_recv_ns"`
	Seconds      float64 `json:"seconds"`
	MsgsPerSec   float64 `json:"msgs_per_sec"`
	P50us        float64 `json:"p50_us"`
	P90us        float64 `json:"p90_us"`
	P99us        float64 `json:"p99_us"`
	Maxus        float64 `json:"max_us"`
	Unparseable  int     `json:"unparseable_lines"`
	PerFileCount []int   `json:"per_file"`
}

// parseUnixDot parses mosquitto_sub's %U ("1470818943.786368637") into
// nanoseconds.
func parseUnixDot(s string) (int64, bool) {
	sec, frac, ok := strings.Cut(s, ".")
	if !ok || len(frac) != 9 {
		return 0, false
	}
	a, err1 := strconv.ParseInt(sec, 10, 64)
	b, err2 := strconv.ParseInt(frac, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return a*1e9 + b, true
}

// cmdLat reads files written by `mosquitto_sub -F '%U %p'` (or '%U'):
// one line per message, the receive time and optionally the payload that
// gen wrote.
func cmdLat(args []string) error {
	fs := flag.NewFlagSet("lat", flag.ContinueOnError)
	asCSV := fs.Bool("csv", false, "print received,min_per_file,seconds,msgs_per_s,p50_us,p90_us,p99_us,max_us instead of JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("name the subscribers' output files")
	}
	res := LatResult{Files: fs.NArg(), MinPerFile: math.MaxInt, FirstSentNs: math.MaxInt64}
	var lats []int64
	for _, name := range fs.Args() {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		count := 0
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			recvField, payload, hasPayload := strings.Cut(sc.Text(), " ")
			recv, ok := parseUnixDot(recvField)
			if !ok {
				res.Unparseable++
				continue
			}
			count++
			res.LastRecvNs = max(res.LastRecvNs, recv)
			if !hasPayload || len(payload) < 19 {
				continue
			}
			sent, err := strconv.ParseInt(payload[:19], 10, 64)
			if err != nil {
				res.Unparseable++
				continue
			}
			res.FirstSentNs = min(res.FirstSentNs, sent)
			lats = append(lats, recv-sent)
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		res.Received += count
		res.MinPerFile = min(res.MinPerFile, count)
		res.PerFileCount = append(res.PerFileCount, count)
	}
	res.Samples = len(lats)
	if len(lats) > 0 {
		slices.Sort(lats)
		pct := func(p float64) float64 {
			i := int(math.Ceil(p*float64(len(lats)))) - 1
			return float64(lats[max(i, 0)]) / 1e3
		}
		res.P50us, res.P90us, res.P99us, res.Maxus = pct(0.50), pct(0.90), pct(0.99), float64(lats[len(lats)-1])/1e3
		res.Seconds = float64(res.LastRecvNs-res.FirstSentNs) / 1e9
		if res.Seconds > 0 {
			res.MsgsPerSec = float64(res.Received) / res.Seconds
		}
	} else {
		res.FirstSentNs = 0
	}
	if res.MinPerFile == math.MaxInt {
		res.MinPerFile = 0
	}
	if *asCSV {
		_, err := fmt.Printf("%d,%d,%.4f,%.0f,%.1f,%.1f,%.1f,%.1f\n", res.Received, res.MinPerFile, res.Seconds,
			res.MsgsPerSec, res.P50us, res.P90us, res.P99us, res.Maxus)
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}
