#!/usr/bin/env bash
# Idle memory per connection (issue 12): the RSS growth of a broker over N
# idle MQTT clients (CONNECT/CONNACK, clean session, no keep-alive), all on
# loopback, N = IDLE_N (default 10 000).
#
#  1. TCP, iotq against Mosquitto 2.0.11: scripts/bench-brokers.sh
#     --skip-throughput (benchkit holds the clients in one process; brokers
#     alternate; IDLE_ROUNDS rounds, default 2). BASE_REV=REV adds iotq
#     built at REV (before/after).
#  2. Every transport of iotq (mqtt, mqtts, ws, wss, quic) and Mosquitto
#     over TCP: go test ./broker -bench IdleConnectionMemory with
#     IOTQ_IDLE_CONNS=N (one broker process per transport).
#
# Each client costs one file descriptor in the process holding the clients
# and one in the broker: the script raises the soft limit to the hard one
# and refuses N larger than what that allows.
#
# Usage: scripts/bench-idle.sh [--out DIR] [--tcp-only]
set -euo pipefail
cd "$(dirname "$0")/.."
out=""
tcp_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift ;;
    --tcp-only) tcp_only=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-idle: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
IDLE_N=${IDLE_N:-10000}
IDLE_ROUNDS=${IDLE_ROUNDS:-2}
out=${out:-results/bench-idle-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if [ "$IDLE_N" -gt $(($(ulimit -n) - 200)) ]; then
  echo "bench-idle: IDLE_N=$IDLE_N needs more file descriptors than the limit $(ulimit -n) allows" >&2
  exit 2
fi
IDLE_N=$IDLE_N IDLE_ROUNDS=$IDLE_ROUNDS scripts/bench-brokers.sh --skip-throughput --out "$out/tcp"
if [ $tcp_only = 0 ]; then
  echo "bench-idle: every transport, $IDLE_N connections each" >&2
  IOTQ_IDLE_CONNS=$IDLE_N go test ./broker -run '^$' -bench IdleConnectionMemory -benchtime 1x -timeout 30m |
    tee "$out/transports.txt"
fi
echo "bench-idle: results in $out" >&2
