// SPDX-License-Identifier: MIT

package listeners

// Helpers added by iotq to the upstream tests restored from mochi-mqtt
// v2.7.9. Upstream slept 1 ms after starting Serve on a goroutine, too
// short on a busy machine; these wait for the listener itself.

import (
	"errors"
	"net/http"
	"syscall"
	"testing"
	"time"
)

const waitTimeout = 10 * time.Second

// httpClient opens a new connection for each request: all tests listen on
// testAddr, and a connection kept alive from the previous test's server
// fails with EOF.
var httpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// request retries do while the connection is refused: the HTTP listeners
// only listen once Serve runs. (Probing with a bare TCP connection first
// made the request after it fail with EOF now and then.)
func request(do func() (*http.Response, error)) (*http.Response, error) {
	deadline := time.Now().Add(waitTimeout)
	for {
		resp, err := do()
		if err == nil || !errors.Is(err, syscall.ECONNREFUSED) || time.Now().After(deadline) {
			return resp, err
		}
		time.Sleep(time.Millisecond)
	}
}

// waitServing waits until the mock listener serves.
func waitServing(t *testing.T, l *MockListener) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !l.IsServing() {
		if time.Now().After(deadline) {
			t.Fatalf("listener %s not serving within %v", l.id, waitTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}
