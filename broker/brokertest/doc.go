// Package brokertest starts real iotq brokers for tests of other packages:
// Start binds 127.0.0.1 with ephemeral ports, waits until the broker is
// ready and closes it in t.Cleanup (generated TLS material stays in
// t.TempDir()); Endpoint picks a listener URL by scheme; ClientTLS trusts
// the broker's generated CA.
//
// It lives beside broker, not in internal/testutil, so that internal/
// stays the ground floor and imports nothing of iotq's (the architecture
// test in internal/archtest checks this). Only tests import it.
package brokertest
