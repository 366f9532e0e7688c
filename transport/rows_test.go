package transport

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/iotq/iotq/transport/endpoint"
)

// TestRowsDriveDialAndListen: a scheme of another protocol works as its
// row says, with no switch of its own: coaps+tcp is TLS with ALPN "coap",
// coap+quic is QUIC with the private ALPN, amqp is TCP; rows whose
// transport is not built here fail with ErrTransportNotBuilt on both sides.
func TestRowsDriveDialAndListen(t *testing.T) {
	srv, cli := serverTLS(t, t.TempDir())
	for _, c := range []struct {
		url      string
		wantALPN string
	}{
		{"coaps+tcp://127.0.0.1:0", endpoint.ALPNCoAP},
		{"coap+quic://127.0.0.1:0", endpoint.ALPNCoAPQUIC},
		{"amqp+quic://127.0.0.1:0", endpoint.ALPNAMQP},
		{"amqp://127.0.0.1:0", ""},
		{"coap+tcp://127.0.0.1:0", ""},
	} {
		t.Run(c.url, func(t *testing.T) {
			ep, err := endpoint.Parse(c.url)
			if err != nil {
				t.Fatal(err)
			}
			l, err := ListenEndpoint(ep, ListenOptions{TLSConfig: srv})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			startEcho(t, l)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			conn, err := DialEndpoint(ctx, l.Endpoint(), DialOptions{TLSConfig: cli})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			roundTrip(t, conn, []byte("row"))
			if info := conn.Info(); info.NegotiatedProto != c.wantALPN || info.Scheme != ep.Scheme {
				t.Fatalf("info %+v, want scheme %s and ALPN %q", info, ep.Scheme, c.wantALPN)
			}
		})
	}
	for _, raw := range []string{"coap://127.0.0.1:0", "coaps://127.0.0.1:5684"} {
		ep, _ := endpoint.Parse(raw)
		if _, err := ListenEndpoint(ep, ListenOptions{TLSConfig: srv}); !errors.Is(err, ErrTransportNotBuilt) {
			t.Errorf("listen %s: %v, want ErrTransportNotBuilt", raw, err)
		}
		if _, err := DialEndpoint(context.Background(), ep, DialOptions{}); !errors.Is(err, ErrTransportNotBuilt) {
			t.Errorf("dial %s: %v, want ErrTransportNotBuilt", raw, err)
		}
	}
}
