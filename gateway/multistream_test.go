package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/iotq/iotq/internal/certs"
	iotqtest "github.com/iotq/iotq/internal/testutil"
)

// TestMultiStreamClientRefused: a multi-stream MQTT over QUIC client (data
// streams after the first, as the mqtt5 crate's per-topic and per-publish
// strategies open) is refused at once with CodeStreamLimit and a reason
// naming the limit, not left waiting on a stream nobody reads; the first
// stream was forwarded until then.
func TestMultiStreamClientRefused(t *testing.T) {
	up := startTCP(t, func(c net.Conn) { _, _ = io.Copy(c, c) })
	g := startGateway(t, "", Route{Upstreams: []string{up.url()}})
	pool, err := certs.CertPool(g.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(g.Endpoints()[0], "quic://")
	ctx, cancel := context.WithTimeout(context.Background(), iotqtest.Scale(15*time.Second))
	defer cancel()
	conn, err := quic.DialAddr(ctx, addr, &tls.Config{RootCAs: pool, NextProtos: []string{"mqtt"}, ServerName: "127.0.0.1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseWithError(0, "")
	ctl, err := conn.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	_ = ctl.SetReadDeadline(time.Now().Add(iotqtest.Scale(10 * time.Second)))
	got := make([]byte, 4)
	if _, err := io.ReadFull(ctl, got); err != nil || string(got) != "ping" {
		t.Fatalf("first stream not forwarded: %q %v", got, err)
	}
	data, err := conn.OpenUniStreamSync(ctx)
	if err != nil {
		t.Fatalf("open a data stream: %v (want it opened, then the connection refused)", err)
	}
	_, _ = data.Write([]byte{0x30, 3, 0, 1, 't'})
	select {
	case <-conn.Context().Done():
	case <-ctx.Done():
		t.Fatal("connection still open after a second stream: the client would hang")
	}
	var ae *quic.ApplicationError
	if err := context.Cause(conn.Context()); !errors.As(err, &ae) || !ae.Remote || uint64(ae.ErrorCode) != CodeStreamLimit {
		t.Fatalf("connection ended with %v, want remote application error %d", err, CodeStreamLimit)
	}
	if !strings.Contains(ae.ErrorMessage, "1 bidirectional stream per QUIC connection") {
		t.Fatalf("reason %q does not name the limit", ae.ErrorMessage)
	}
}
