package transport

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkConnect measures, per transport on loopback, the time from Dial
// to the first echoed byte (connection setup plus one request-response),
// without Close. Variants "resumed" use a warm FileSessionCache (QUIC:
// 0-RTT). Run: go test ./transport -run XXX -bench Connect -benchtime 200x
func BenchmarkConnect(b *testing.B) {
	srv, cli := serverTLS(b, b.TempDir())
	cases := []struct {
		name    string
		scheme  Scheme
		resumed bool
		memory  bool // in-memory cache instead of a file
	}{
		{"transport=mqtt", SchemeTCP, false, false},
		{"transport=mqtts", SchemeTLS, false, false},
		{"transport=mqtts/resumed", SchemeTLS, true, false},
		{"transport=ws", SchemeWS, false, false},
		{"transport=wss", SchemeWSS, false, false},
		{"transport=quic", SchemeQUIC, false, false},
		{"transport=quic/0rtt", SchemeQUIC, true, false},
		{"transport=mqtts/resumed-memcache", SchemeTLS, true, true},
		{"transport=quic/0rtt-memcache", SchemeQUIC, true, true},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			l, err := Listen(string(tc.scheme)+"://127.0.0.1:0", ListenOptions{TLSConfig: srv})
			if err != nil {
				b.Fatal(err)
			}
			startEcho(b, l)
			opts := DialOptions{TLSConfig: cli}
			if tc.memory {
				opts.SessionCache = tls.NewLRUClientSessionCache(8)
			} else if tc.resumed {
				cache, err := NewFileSessionCache(filepath.Join(b.TempDir(), "c.json"), nil)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { cache.Close() })
				opts.SessionCache = cache
			}
			one := func() (time.Duration, Info) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				start := time.Now()
				c, err := Dial(ctx, l.Endpoint().String(), opts)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := c.Write([]byte{1}); err != nil {
					b.Fatal(err)
				}
				if _, err := c.Read(make([]byte, 1)); err != nil {
					b.Fatal(err)
				}
				d := time.Since(start)
				info := c.Info()
				c.Close()
				return d, info
			}
			if tc.resumed { // fill the cache
				one()
				time.Sleep(20 * time.Millisecond)
			}
			var total time.Duration
			early := 0
			b.ResetTimer()
			for range b.N {
				d, info := one()
				total += d
				if info.Used0RTT {
					early++
				}
			}
			b.ReportMetric(float64(total.Microseconds())/float64(b.N), "us/connect+echo")
			if tc.scheme == SchemeQUIC {
				b.ReportMetric(float64(early)/float64(b.N), "0rtt-ratio")
			}
		})
	}
}

// BenchmarkQUICConnectDelayed measures Dial-to-first-echoed-byte through a
// UDP proxy adding 25 ms each way (no loss): a full handshake needs 2 round
// trips, 0-RTT one. Run: go test ./transport -run XXX -bench QUICConnectDelayed -benchtime 20x
func BenchmarkQUICConnectDelayed(b *testing.B) {
	srv, cli := serverTLS(b, b.TempDir())
	l, err := Listen("quic://127.0.0.1:0", ListenOptions{TLSConfig: srv})
	if err != nil {
		b.Fatal(err)
	}
	startEcho(b, l)
	for _, zeroRTT := range []bool{false, true} {
		name := "handshake=full"
		if zeroRTT {
			name = "handshake=0rtt"
		}
		b.Run(name, func(b *testing.B) {
			p := newLossyProxyTB(b, l.Addr(), 0, 25*time.Millisecond, 1)
			url := "quic://" + p.addr()
			opts := DialOptions{TLSConfig: &tls.Config{RootCAs: cli.RootCAs, ServerName: "127.0.0.1"}}
			if zeroRTT {
				opts.SessionCache = tls.NewLRUClientSessionCache(8)
			}
			one := func(want0RTT bool) time.Duration {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				start := time.Now()
				c, err := Dial(ctx, url, opts)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				if _, err := c.Write([]byte{1}); err != nil {
					b.Fatal(err)
				}
				if _, err := c.Read(make([]byte, 1)); err != nil {
					b.Fatal(err)
				}
				d := time.Since(start)
				if want0RTT && !c.Info().Used0RTT {
					b.Fatal("0-RTT not used")
				}
				return d
			}
			if zeroRTT {
				one(false) // fills the cache
			}
			var total time.Duration
			b.ResetTimer()
			for range b.N {
				total += one(zeroRTT)
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/connect+echo")
		})
	}
}
