// Command benchkit is the small helper of scripts/bench-brokers.sh. It is
// a module of its own (standard library only), so it shares no code with
// iotq's broker or clients: the MQTT load itself comes from Mosquitto's
// command-line clients (mosquitto_pub, mosquitto_sub), the same for every
// broker. benchkit only
//
//   - picks free loopback ports and waits for a listener (freeport, waitport),
//   - writes the publisher's input: one line per message, each starting
//     with the time it was written, in nanoseconds (gen),
//   - turns the subscribers' output (receive time, payload) into counts,
//     throughput and latency percentiles (lat),
//   - holds N idle MQTT 3.1.1 connections open for the memory measurement
//     (idle; raw CONNECT/CONNACK, nothing else),
//   - reads /proc for a process's resident memory (rss), and
//   - folds the per-run CSV into medians and ratios (summarize).
//
// Run it as `go run . SUBCOMMAND -h` in this directory.
package main
