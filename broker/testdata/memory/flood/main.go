// Command flood sends hostile MQTT input to a broker, for the memory
// measurements in docs/broker.md ("Limits"; broker/testdata/memory/flood.sh
// runs it). Modes, each over -conns connections at once, -rounds times:
//
//	garbage     a CONNECT header announcing -size bytes, then 4 KiB of random bytes
//	random      8 KiB of random bytes starting with 0x10 (CONNECT)
//	bigconnect  an MQTT 5 CONNECT whose properties are -size bytes of empty user properties
//	pubprops    an MQTT 5 CONNECT, then a PUBLISH with -size bytes of empty user properties
//	subs        a clean 3.1.1 session subscribing to -filters distinct filters, then DISCONNECT
//	subbig      a 3.1.1 SUBSCRIBE of -size bytes of one-character filters
//
// Each connection stays open for -hold.
package main

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

func varint(n int) []byte {
	var b []byte
	for {
		d := byte(n % 128)
		n /= 128
		if n > 0 {
			d |= 0x80
		}
		b = append(b, d)
		if n == 0 {
			return b
		}
	}
}

func s16(s string) []byte { return append(binary.BigEndian.AppendUint16(nil, uint16(len(s))), s...) }

func packet(h byte, body []byte) []byte {
	return append(append([]byte{h}, varint(len(body))...), body...)
}

func connect(id string, v5 bool, props []byte) []byte {
	var b bytes.Buffer
	b.Write(s16("MQTT"))
	if v5 {
		b.WriteByte(5)
	} else {
		b.WriteByte(4)
	}
	b.WriteByte(0x02)
	b.Write([]byte{0, 60})
	if v5 {
		b.Write(varint(len(props)))
		b.Write(props)
	}
	b.Write(s16(id))
	return packet(0x10, b.Bytes())
}

// userProps returns about n bytes of empty user properties (5 bytes each).
func userProps(n int) []byte {
	b := make([]byte, 0, n)
	for len(b)+5 <= n {
		b = append(b, 38, 0, 0, 0, 0)
	}
	return b
}

func main() {
	addr := flag.String("addr", "127.0.0.1:1883", "broker")
	mode := flag.String("mode", "garbage", "garbage | bigconnect | connprops | pubprops | subs")
	conns := flag.Int("conns", 100, "connections (at once)")
	rounds := flag.Int("rounds", 1, "rounds")
	size := flag.Int("size", 15<<20, "bytes announced / property bytes")
	hold := flag.Duration("hold", 3*time.Second, "how long each connection stays open")
	filters := flag.Int("filters", 1000, "filters per SUBSCRIBE")
	flag.Parse()
	var failed atomic.Int64
	start := time.Now()
	for r := 0; r < *rounds; r++ {
		var wg sync.WaitGroup
		for i := 0; i < *conns; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				c, err := net.DialTimeout("tcp", *addr, 10*time.Second)
				if err != nil {
					failed.Add(1)
					return
				}
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(*hold + 60*time.Second))
				id := fmt.Sprintf("flood-%d-%d", r, i)
				switch *mode {
				case "garbage":
					// A CONNECT header announcing size bytes, then random bytes.
					b := append([]byte{0x10}, varint(*size)...)
					rnd := make([]byte, 4096)
					for j := range rnd {
						rnd[j] = byte(rand.IntN(256))
					}
					_, _ = c.Write(append(b, rnd...))
					time.Sleep(*hold)
				case "random":
					rnd := make([]byte, 8192)
					for j := range rnd {
						rnd[j] = byte(rand.IntN(256))
					}
					rnd[0] = 0x10
					_, _ = c.Write(rnd)
					time.Sleep(*hold)
				case "bigconnect":
					// A v5 CONNECT whose properties are size bytes of user properties, sent in full.
					_, _ = c.Write(connect(id, true, userProps(*size)))
					time.Sleep(*hold)
				case "pubprops":
					// CONNECT, then a PUBLISH with size bytes of user properties.
					_, _ = c.Write(connect(id, true, nil))
					ack := make([]byte, 64)
					if _, err := c.Read(ack); err != nil {
						failed.Add(1)
						return
					}
					props := userProps(*size)
					var body bytes.Buffer
					body.Write(s16("flood/t"))
					body.Write(varint(len(props)))
					body.Write(props)
					body.WriteString("x")
					_, _ = c.Write(packet(0x30, body.Bytes()))
					time.Sleep(*hold)
				case "subbig":
					_, _ = c.Write(connect(id, false, nil))
					ack := make([]byte, 4)
					if _, err := io.ReadFull(c, ack); err != nil {
						failed.Add(1)
						return
					}
					body := make([]byte, 2, *size)
					body[1] = 1
					for len(body)+4 <= *size {
						body = append(body, 0, 1, 'a', 0)
					}
					_, _ = c.Write(packet(0x82, body))
					_, _ = io.Copy(io.Discard, c)
				case "subs":
					_, _ = c.Write(connect(id, false, nil))
					ack := make([]byte, 4)
					if _, err := io.ReadFull(c, ack); err != nil {
						failed.Add(1)
						return
					}
					var body bytes.Buffer
					body.Write([]byte{0, 1})
					for f := 0; f < *filters; f++ {
						body.Write(s16(fmt.Sprintf("flood/%d/%d/%d/+/x", r, i, f)))
						body.WriteByte(1)
					}
					_, _ = c.Write(packet(0x82, body.Bytes()))
					// SUBACK: 2 + filters bytes after the fixed header.
					buf := make([]byte, 4+*filters)
					n := 0
					for n < 2+2+*filters-1 {
						k, err := c.Read(buf[n:])
						if err != nil {
							failed.Add(1)
							return
						}
						n += k
					}
					time.Sleep(*hold)
					_, _ = c.Write([]byte{0xe0, 0})
				default:
					fmt.Fprintln(os.Stderr, "unknown mode")
					os.Exit(2)
				}
			}(i)
		}
		wg.Wait()
	}
	fmt.Printf("mode %s: %d rounds x %d connections in %.1f s, %d failed\n", *mode, *rounds, *conns, time.Since(start).Seconds(), failed.Load())
}
