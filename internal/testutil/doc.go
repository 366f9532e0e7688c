// Package testutil holds test helpers shared by iotq's packages:
// StartBroker starts a real broker on 127.0.0.1 with an ephemeral port and
// closes it in t.Cleanup (TLS material in t.TempDir()); ClientTLS trusts
// its generated CA; Endpoint picks a listener URL by scheme; Eventually
// polls a condition instead of sleeping; Scale stretches timeouts on slow machines (IOTQ_TIMESCALE); Logger gives
// test logs (IOTQ_LOG=debug shows them); RequireNetAdmin skips without root
// and network-namespace support, except under CI where it fails.
//
// Only tests import this package. Helpers are safe for concurrent use by
// parallel tests; each returns resources owned by the calling test.
package testutil
