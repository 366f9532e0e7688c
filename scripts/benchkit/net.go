package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

func cmdFreePort(args []string) error {
	fs := flag.NewFlagSet("freeport", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen on 127.0.0.1:0: %w", err)
	}
	defer l.Close()
	fmt.Println(l.Addr().(*net.TCPAddr).Port)
	return nil
}

func cmdWaitPort(args []string) error {
	fs := flag.NewFlagSet("waitport", flag.ContinueOnError)
	addr := fs.String("addr", "", "HOST:PORT to wait for")
	timeout := fs.Duration("timeout", 10*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	deadline := time.Now().Add(*timeout)
	for {
		c, err := net.DialTimeout("tcp", *addr, time.Second)
		if err == nil {
			return c.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not accepting after %v: %w", *addr, *timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// connectPacket is an MQTT 3.1.1 CONNECT with a clean session, no
// keepalive (the broker never times the client out) and the given id.
func connectPacket(clientID string) []byte {
	var body []byte
	body = append(body, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 0)
	body = binary.BigEndian.AppendUint16(body, uint16(len(clientID)))
	body = append(body, clientID...)
	pkt := []byte{0x10}
	n := len(body)
	for {
		b := byte(n % 128)
		n /= 128
		if n > 0 {
			b |= 0x80
		}
		pkt = append(pkt, b)
		if n == 0 {
			break
		}
	}
	return append(pkt, body...)
}

func dialIdle(ctx context.Context, addr, clientID string) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(connectPacket(clientID)); err != nil {
		c.Close()
		return nil, fmt.Errorf("write CONNECT: %w", err)
	}
	var ack [4]byte
	if _, err := io.ReadFull(c, ack[:]); err != nil {
		c.Close()
		return nil, fmt.Errorf("read CONNACK: %w", err)
	}
	if ack[0] != 0x20 || ack[3] != 0 {
		c.Close()
		return nil, fmt.Errorf("CONNACK refused: % x", ack)
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// cmdIdle opens -n MQTT connections, prints "connected N", holds them
// until standard input reaches end of file (or -hold passes), closes
// them and prints "closed".
func cmdIdle(args []string) error {
	fs := flag.NewFlagSet("idle", flag.ContinueOnError)
	addr := fs.String("addr", "", "broker HOST:PORT (TCP)")
	n := fs.Int("n", 2000, "number of idle connections")
	prefix := fs.String("prefix", "idle", "client identifier prefix")
	parallel := fs.Int("parallel", 32, "connections opened at once")
	hold := fs.Duration("hold", 5*time.Minute, "close after this long even if standard input stays open")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 1 || *parallel < 1 {
		return errors.New("-n and -parallel must be at least 1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *hold)
	defer cancel()
	conns := make([]net.Conn, *n)
	errs := make([]error, *n)
	sem := make(chan struct{}, *parallel)
	var wg sync.WaitGroup
	for i := range *n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			conns[i], errs[i] = dialIdle(ctx, *addr, fmt.Sprintf("%s-%d", *prefix, i))
		}()
	}
	wg.Wait()
	closeAll := func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		closeAll()
		return fmt.Errorf("opening %d connections to %s: %w", *n, *addr, err)
	}
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(out, "connected %d\n", *n)
	out.Flush()
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	select {
	case <-eof:
	case <-ctx.Done():
	}
	closeAll()
	fmt.Fprintln(out, "closed")
	return out.Flush()
}
