package lab

// A fake iotq for testing ProcRunner without root, network or the real
// broker: when the test binary runs with IOTQ_LAB_FAKE=1 it acts as
// "iotq broker|pub|sub" with the flags and files of the real contract,
// and moves messages through files in a "bus" directory next to the
// broker's CA file instead of MQTT.

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	if os.Getenv("IOTQ_LAB_FAKE") == "1" {
		os.Exit(fakeMain(os.Args[1:]))
	}
	if every := os.Getenv(probeChildEnv); every != "" {
		os.Exit(probeChildMain(every))
	}
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

func fakeMain(args []string) int {
	if len(args) == 0 {
		return 2
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	var listen []string
	fs.Func("listen", "", func(s string) error { listen = append(listen, s); return nil })
	state := fs.String("state-dir", "", "")
	ready := fs.String("ready-file", "", "")
	fs.String("log-format", "", "")
	fs.String("url", "", "")
	ca := fs.String("ca", "", "")
	topic := fs.String("t", "", "")
	qos := fs.Int("q", 0, "")
	size := fs.Int("size", 100, "")
	n := fs.Int("n", 1, "")
	interval := fs.Duration("interval", 0, "")
	timeout := fs.Duration("timeout", time.Minute, "")
	records := fs.String("records", "", "")
	fs.String("stats", "", "")
	cache := fs.String("session-cache", "", "")
	gate := fs.String("gate", "", "")
	notify := fs.String("notify", "", "")
	fs.String("client-id", "", "")
	fs.Bool("closed-loop", false, "")
	fs.Duration("connect-timeout", 0, "")
	fs.Bool("quiet", false, "")
	fs.String("quic-0rtt", "", "")
	fs.Bool("early", false, "")
	reconnect := fs.Bool("reconnect", false, "")
	fs.Bool("persistent", false, "")
	if err := fs.Parse(args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	switch args[0] {
	case "broker":
		if os.Getenv("IOTQ_LAB_FAKE_BROKER_FAIL") == "1" {
			fmt.Fprintln(os.Stderr, "fake broker: cannot listen")
			return 1
		}
		os.MkdirAll(filepath.Join(*state, "bus"), 0o755)
		caFile := filepath.Join(*state, "ca.pem")
		os.WriteFile(caFile, []byte("fake"), 0o644)
		for i, l := range listen {
			listen[i] = strings.Replace(l, ":0", ":9", 1) // a real broker reports the port it got
		}
		b, _ := json.Marshal(map[string]any{"listeners": listen, "ca_file": caFile, "pid": os.Getpid()})
		os.WriteFile(*ready+".tmp", b, 0o644)
		os.Rename(*ready+".tmp", *ready)
		<-sig
		return 0
	case "pub":
		bus := filepath.Join(filepath.Dir(*ca), "bus")
		dial := time.Now().UnixNano()
		resumed := false
		if *cache != "" {
			if _, err := os.Stat(*cache); err == nil {
				resumed = true
			}
			os.WriteFile(*cache, []byte("ticket"), 0o600)
		}
		rec, _ := os.Create(*records)
		fmt.Fprintln(rec, "seq,size,send_ns,accepted_ns,ok,error")
		in := bufio.NewScanner(os.Stdin)
		var anchor time.Time // message 0's send time: a paced schedule starts there, as iotq pub's
		for i := 0; i < *n; i++ {
			if *gate == "stdin" && !in.Scan() {
				break
			}
			if *interval > 0 && i > 0 {
				time.Sleep(time.Until(anchor.Add(time.Duration(i) * *interval)))
			}
			send := time.Now().UnixNano()
			if i == 0 {
				anchor = time.Unix(0, send)
			}
			name := strings.ReplaceAll(*topic, "/", "_") + "-" + strconv.Itoa(i)
			tmp := filepath.Join(bus, "."+name)
			os.WriteFile(tmp, []byte(fmt.Sprintf("%s %d %d %d", *topic, i, send, *size)), 0o644)
			os.Rename(tmp, filepath.Join(bus, name))
			fmt.Fprintf(rec, "%d,%d,%d,%d,true,\n", i, *size, send, time.Now().UnixNano())
		}
		rec.Close()
		// A reconnecting fake reports one reconnection, as if its first
		// connection had been lost once.
		reconnects := 0
		if *reconnect {
			reconnects = 1
		}
		st, _ := json.Marshal(map[string]any{"connection": map[string]any{"transport": "fake", "used_0rtt": resumed, "tls_resumed": resumed,
			"dial_start_ns": dial, "transport_ready_ns": dial + 1000, "connack_ns": dial + 2000}, "sent": *n, "reconnects": reconnects})
		fmt.Println(string(st))
		return 0
	case "sub":
		bus := filepath.Join(filepath.Dir(*ca), "bus")
		dial := time.Now().UnixNano()
		rec, _ := os.Create(*records)
		w := bufio.NewWriter(rec)
		fmt.Fprintln(w, "seq,size,send_ns,recv_ns,delay_ns,topic,qos,duplicate")
		os.WriteFile(*ready, []byte("{}"), 0o644)
		seen := map[string]bool{}
		got := 0
		end := time.After(*timeout)
		var out io.Writer = os.Stdout
	loop:
		for got < *n {
			select {
			case <-sig:
				break loop
			case <-end:
				break loop
			case <-time.After(2 * time.Millisecond):
			}
			entries, _ := os.ReadDir(bus)
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ".") || seen[e.Name()] {
					continue
				}
				b, err := os.ReadFile(filepath.Join(bus, e.Name()))
				if err != nil {
					continue
				}
				var tp string
				var seq, send int64
				var sz int
				fmt.Sscanf(string(b), "%s %d %d %d", &tp, &seq, &send, &sz)
				match := tp == *topic || (strings.HasSuffix(*topic, "/#") && strings.HasPrefix(tp, strings.TrimSuffix(*topic, "#")))
				if !match {
					continue
				}
				seen[e.Name()] = true
				now := time.Now().UnixNano()
				fmt.Fprintf(w, "%d,%d,%d,%d,%d,%s,%d,false\n", seq, sz, send, now, now-send, tp, *qos)
				w.Flush()
				got++
				if *notify == "stdout" {
					fmt.Fprintf(out, "recv %d\n", seq)
				}
			}
		}
		w.Flush()
		rec.Close()
		st, _ := json.Marshal(map[string]any{"connection": map[string]any{"transport": "fake", "dial_start_ns": dial,
			"transport_ready_ns": dial + 1000, "connack_ns": dial + 2000}, "received": got})
		fmt.Println(string(st))
		return 0
	}
	return 2
}
