package coapfront

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/plgd-dev/go-coap/v3/message/codes"

	"github.com/iotq/iotq/internal/testutil"
)

// TestLibcoapSeesContentFormat: libcoap's coap-client (an independent
// implementation) reads a topic's data and observes it; the response, the
// registration response and the notification carry the topic's
// topic-content-format (here 50, application/json), as libcoap decodes
// the options. Under CI=true a missing coap-client fails the test.
func TestLibcoapSeesContentFormat(t *testing.T) {
	bin := testutil.RequireTool(t, "coap-client-notls", "apt-get install libcoap3-bin")
	topics := &memTopics{}
	f, c := startFront(t, topics)
	_, data := createTopic(t, c, map[uint64]cborValue{0: {kind: 3, s: "lib/json"}, 2: {kind: 3, s: "core.ps.data"}, 3: {kind: 0, u: 50}})
	if r := publishTo(t, c, data, `{"v":1}`); r.Code != codes.Created {
		t.Fatalf("PUT: %v", r.Code)
	}
	uri := fmt.Sprintf("coap://%s/%s", c.peer.String(), data)
	const cf = "Content-Format:application/json"

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "-v", "7", "-m", "get", uri).CombinedOutput()
	if err != nil || !strings.Contains(string(out), cf) || !strings.Contains(string(out), `{"v":1}`) {
		t.Fatalf("coap-client get: %v\n%s\nwant %s and the value", err, out, cf)
	}

	var obsOut bytes.Buffer
	obs := exec.CommandContext(ctx, bin, "-v", "7", "-s", "5", "-m", "get", uri)
	obs.Stdout, obs.Stderr = &obsOut, &obsOut
	if err := obs.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- obs.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for f.Stats().Observers != 1 {
		if time.Now().After(deadline) {
			t.Fatal("coap-client's observation not registered within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = topics.Publish("lib/json", []byte(`{"v":2}`), 1, false)
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("coap-client observer did not end")
	}
	got := obsOut.String()
	if strings.Count(got, cf) < 2 || !strings.Contains(got, `{"v":2}`) {
		t.Fatalf("coap-client observe output:\n%s\nwant %s on the registration response and the notification", got, cf)
	}
}
