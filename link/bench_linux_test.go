package link

import (
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the user+system CPU time of this process.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// udpBlast sends count packets of size bytes from c and counts what rx
// receives; it returns the packets received and the elapsed time.
func udpBlast(c *net.UDPConn, rx net.PacketConn, count, size int) (int, time.Duration) {
	var got atomic.Int64
	done := make(chan struct{})
	var last atomic.Int64
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			rx.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			if _, _, err := rx.ReadFrom(buf); err != nil {
				return
			}
			got.Add(1)
			last.Store(time.Now().UnixNano())
		}
	}()
	msg := make([]byte, size)
	start := time.Now()
	for i := range count {
		c.Write(msg)
		if i%32 == 31 {
			time.Sleep(20 * time.Microsecond) // let the receiver drain; TUN queues hold 500
		}
	}
	<-done
	return int(got.Load()), time.Duration(last.Load() - start.UnixNano())
}

// BenchmarkForwardUDP reports the CPU the emulator spends per forwarded
// packet: the process CPU per packet through an emulated link (unlimited
// rate, no delay) minus the same traffic over loopback without it.
func BenchmarkForwardUDP(b *testing.B) {
	n := up(b, twoNodes(Params{}, Params{}), Options{})
	var rx net.PacketConn
	if err := n.Do("b", func() (err error) { rx, err = net.ListenPacket("udp4", ":7500"); return }); err != nil {
		b.Fatal(err)
	}
	defer rx.Close()
	rx.(*net.UDPConn).SetReadBuffer(8 << 20)
	c := dialUDP(b, n, "a", netip.AddrPortFrom(n.AddrOn("b", "ab"), 7500))

	// Baseline: the same sockets' work on loopback inside node b.
	var lrx net.PacketConn
	var lc *net.UDPConn
	if err := n.Do("b", func() error {
		var err error
		if lrx, err = net.ListenPacket("udp4", "127.0.0.1:7501"); err != nil {
			return err
		}
		lc, err = net.DialUDP("udp4", nil, lrx.LocalAddr().(*net.UDPAddr))
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer lrx.Close()
	defer lc.Close()
	lrx.(*net.UDPConn).SetReadBuffer(8 << 20)

	count := max(b.N, 20000)
	cpu0 := cpuTime()
	lgot, _ := udpBlast(lc, lrx, count, 1000)
	base := cpuTime() - cpu0 - 300*time.Millisecond*0 // the receive timeout idles, it costs no CPU
	b.ResetTimer()
	cpu1 := cpuTime()
	got, el := udpBlast(c, rx, count, 1000)
	total := cpuTime() - cpu1
	b.StopTimer()
	perPkt := float64(total)/float64(max(got, 1)) - float64(base)/float64(max(lgot, 1))
	b.ReportMetric(perPkt/1e3, "emu-cpu-us/pkt")
	b.ReportMetric(float64(total)/float64(max(got, 1))/1e3, "total-cpu-us/pkt")
	b.ReportMetric(float64(got)/el.Seconds(), "pkt/s")
	b.ReportMetric(float64(got)*1028*8/el.Seconds()/1e6, "Mbit/s")
	b.ReportMetric(100*float64(count-got)/float64(count), "%lost")
}

// BenchmarkTCP reports TCP throughput and the process's CPU use through an
// unlimited link (the highest rate the emulator sustains) and through 20
// and 100 Mbit/s links with 10 ms each way. The sender and receiver run in
// this process too, so %cpu is an upper bound for the emulator.
func BenchmarkTCP(b *testing.B) {
	for _, c := range []struct {
		name string
		p    Params
	}{
		{"rate=unlimited", Params{}},
		{"rate=20mbit", Params{Rate: 20_000_000, Delay: 10 * time.Millisecond}},
		{"rate=100mbit", Params{Rate: 100_000_000, Delay: 10 * time.Millisecond}},
	} {
		b.Run(c.name, func(b *testing.B) { benchTCP(b, c.p) })
	}
}

func benchTCP(b *testing.B, p Params) {
	n := up(b, twoNodes(p, p), Options{CongestionControl: "cubic"})
	var ln net.Listener
	if err := n.Do("b", func() (err error) { ln, err = net.Listen("tcp4", ":7600"); return }); err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	res := make(chan int64)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			res <- 0
			return
		}
		k, _ := io.Copy(io.Discard, c)
		res <- k
	}()
	var c net.Conn
	if err := n.Do("a", func() (err error) {
		c, err = net.Dial("tcp4", netip.AddrPortFrom(n.AddrOn("b", "ab"), 7600).String())
		return
	}); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	start := time.Now()
	cpu0 := cpuTime()
	for time.Since(start) < 2*time.Second {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	c.Close()
	k := <-res
	el := time.Since(start)
	cpu := cpuTime() - cpu0
	st := statsOf(b, n, "ab", "a->b")
	b.ReportMetric(float64(k)*8/el.Seconds()/1e6, "Mbit/s")
	b.ReportMetric(float64(st.Packets)/el.Seconds(), "pkt/s")
	b.ReportMetric(100*cpu.Seconds()/el.Seconds(), "%cpu")
}

// delayErrors sends probes through a 10 ms one-way link and returns the
// error of each measured one-way delay (sender and receiver share a clock).
func delayErrors(b *testing.B, n *Network, port int, probes int) []time.Duration {
	var rx net.PacketConn
	if err := n.Do("b", func() (err error) {
		rx, err = net.ListenPacket("udp4", netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(port)).String())
		return
	}); err != nil {
		b.Fatal(err)
	}
	defer rx.Close()
	c := dialUDP(b, n, "a", netip.AddrPortFrom(n.AddrOn("b", "ab"), uint16(port)))
	errs := make([]time.Duration, 0, probes)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			rx.SetReadDeadline(time.Now().Add(time.Second))
			k, _, err := rx.ReadFrom(buf)
			if err != nil {
				return
			}
			if k >= 8 {
				d := time.Duration(time.Now().UnixNano() - int64(binary.BigEndian.Uint64(buf)))
				errs = append(errs, d-10*time.Millisecond)
			}
		}
	}()
	msg := make([]byte, 100)
	for range probes {
		binary.BigEndian.PutUint64(msg, uint64(time.Now().UnixNano()))
		c.Write(msg)
		time.Sleep(time.Millisecond)
	}
	<-done
	slices.Sort(errs)
	return errs
}

func reportQuantiles(b *testing.B, n *Network, e []time.Duration) {
	if ok, err := n.RealTime(); !ok {
		b.Logf("no SCHED_FIFO: %v", err)
	}
	st := statsOf(b, n, "ab", "a->b")
	b.Logf("probes a->b: %d packets; lateness %+v", st.Packets, n.Lateness())
	l := n.Lateness()
	b.ReportMetric(float64(l.P50)/1e3, "emu-late-p50-us")
	b.ReportMetric(float64(l.P99)/1e3, "emu-late-p99-us")
	b.ReportMetric(float64(l.P999)/1e3, "emu-late-p99.9-us")
	if len(e) == 0 {
		b.Fatal("no probes came back")
	}
	q := func(p float64) float64 { return float64(e[min(len(e)-1, int(p*float64(len(e))))]) / 1e3 }
	b.ReportMetric(q(0.5), "p50-us")
	b.ReportMetric(q(0.99), "p99-us")
	b.ReportMetric(q(0.999), "p99.9-us")
	b.ReportMetric(float64(e[0])/1e3, "min-us")
}

// BenchmarkDelayError measures how late packets leave against the model's
// 10 ms, on an idle machine and with load: two CPU-bound processes plus
// 20 Mbit/s of bulk TCP through a second link of the same network.
func BenchmarkDelayError(b *testing.B) {
	for _, rtp := range []bool{false, true} {
		name := "rt=thread"
		if rtp {
			name = "rt=process"
		}
		b.Run(name+"/idle", func(b *testing.B) { benchDelayIdle(b, rtp) })
		b.Run(name+"/loaded", func(b *testing.B) { benchDelayLoaded(b, rtp) })
	}
}

func benchDelayIdle(b *testing.B, rtp bool) {
	p := Params{Delay: 10 * time.Millisecond}
	n := up(b, twoNodes(p, p), Options{RealTimeProcess: rtp})
	reportQuantiles(b, n, delayErrors(b, n, 7700, 3000))
}

func benchDelayLoaded(b *testing.B, rtp bool) {
	p := Params{Delay: 10 * time.Millisecond}
	{
		topo := Topology{
			Nodes: []Node{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}},
			Links: []Link{{Name: "ab", A: "a", B: "b", AtoB: p, BtoA: p},
				{Name: "cd", A: "c", B: "d", AtoB: Params{Rate: 20_000_000, Delay: 5 * time.Millisecond}, BtoA: Params{Delay: 5 * time.Millisecond}}},
		}
		n := up(b, topo, Options{RealTimeProcess: rtp})
		for range 2 {
			hog := exec.Command("sh", "-c", "while :; do :; done")
			if err := hog.Start(); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { hog.Process.Kill(); hog.Wait() })
		}
		// The bulk transfer runs in separate processes, as lab nodes do.
		sink := n.Command(b.Context(), "d", "python3", "-c",
			"import socket\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\ns.bind(('',7800))\ns.listen()\nc,_=s.accept()\nwhile c.recv(65536): pass")
		if err := sink.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { sink.Process.Kill(); sink.Wait() })
		time.Sleep(300 * time.Millisecond)
		src := n.Command(b.Context(), "c", "python3", "-c",
			"import socket,time\nc=socket.create_connection(('"+n.AddrOn("d", "cd").String()+"',7800))\nb=bytes(65536)\nt=time.time()+30\nwhile time.time()<t: c.sendall(b)")
		if err := src.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { src.Process.Kill(); src.Wait() })
		e := delayErrors(b, n, 7701, 3000)
		reportQuantiles(b, n, e)
	}
}
