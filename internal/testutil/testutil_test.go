package testutil

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/transport"
)

func TestStartBrokerTLSStaysInTempDir(t *testing.T) {
	srv := StartBroker(t, broker.Options{Listen: []string{"mqtt://127.0.0.1:0", "mqtts://127.0.0.1:0"}})
	if srv.CAFile() == "" || srv.Options().StateDir == broker.DefaultStateDir() {
		t.Fatalf("CA %q in state dir %q", srv.CAFile(), srv.Options().StateDir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), Scale(5*time.Second))
	defer cancel()
	c, err := transport.Dial(ctx, Endpoint(t, srv, "mqtts"), transport.DialOptions{TLSConfig: ClientTLS(t, srv)})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestEventually(t *testing.T) {
	n := 0
	Eventually(t, time.Second, func() error {
		n++
		if n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if n != 3 {
		t.Fatalf("fn called %d times", n)
	}
}
