// Package testutil holds test helpers shared by iotq's packages, in one
// place: Eventually polls a condition instead of sleeping; Scale stretches
// timeouts on slow machines (IOTQ_TIMESCALE); Logger gives test logs
// (IOTQ_LOG=debug shows them); RequireNetAdmin, RequireTool and SkipOrFail
// skip when a capability or peer program is missing, except under CI=true
// where they fail (a skip must never hide a transport or a peer in CI);
// StartMosquitto runs a real Mosquitto broker on a free loopback port;
// StartNATSCluster runs a nats-server cluster (JetStream and MQTT on, each
// node killable alone) for the gateway's failover test; FreePort picks a
// port.
//
// A real iotq broker for tests is broker/brokertest.Start: testutil, like
// all of internal/, imports nothing of iotq's.
//
// Only tests import this package. Helpers are safe for concurrent use by
// parallel tests; each returns resources owned by the calling test, which
// stops them in t.Cleanup (processes by their own PID only).
package testutil
