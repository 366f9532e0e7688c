package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/internal/serve"
	"github.com/iotq/iotq/internal/testutil"
	"github.com/iotq/iotq/transport"
)

func TestStartTLSStaysInTempDir(t *testing.T) {
	srv := Start(t, broker.Options{Listen: []string{"mqtt://127.0.0.1:0", "mqtts://127.0.0.1:0"}})
	if srv.CAFile() == "" || srv.Options().StateDir == serve.DefaultStateDir() {
		t.Fatalf("CA %q in state dir %q", srv.CAFile(), srv.Options().StateDir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(5*time.Second))
	defer cancel()
	c, err := transport.Dial(ctx, Endpoint(t, srv, "mqtts"), transport.DialOptions{TLSConfig: ClientTLS(t, srv)})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}
