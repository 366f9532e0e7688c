#!/bin/bash
# One stuck QoS 1 subscriber and 70 000 QoS 1 messages of 20 bytes against
# an iotq broker binary, with RSS (/proc/PID/status) and the broker's own
# gauges. See docs/broker.md, "Limits".
#
# usage: stuck.sh BINARY bolt|none CLEAN(1|0) [broker flags...]
#   CLEAN 1: the subscriber has a clean session, 0: a persistent one.
# Needs python3 and curl; WINDOW (default 100) is the publisher's window.
set -u
D=$(cd "$(dirname "$0")" && pwd)
BIN=$1 STORE=$2 CLEAN=$3
shift 3
P=$((20000 + RANDOM % 20000)) M=$((P + 1))
SD=$(mktemp -d)
ARGS=()
[ "$STORE" = none ] && ARGS=(--store none)
"$BIN" broker --state-dir "$SD" --listen "mqtt://127.0.0.1:$P" --metrics "127.0.0.1:$M" --pprof "${ARGS[@]}" "$@" >"$SD/log" 2>&1 &
BP=$!
for _ in $(seq 50); do curl -sf "127.0.0.1:$M/healthz" >/dev/null && break; sleep 0.2; done
rss() { awk '/VmRSS/{printf "%.1f MB", $2/1024}' "/proc/$BP/status"; }
echo "start: RSS $(rss)"
python3 "$D/stuck.py" 127.0.0.1 "$P" t "$CLEAN" stuck 120 >"$SD/stuck.log" 2>&1 &
SP=$!
sleep 1
python3 "$D/pub.py" 127.0.0.1 "$P" t 70000 20 "${WINDOW:-100}"
sleep 2
echo "2 s after the last PUBACK: RSS $(rss)"
curl -s "127.0.0.1:$M/metrics" | grep -E '^iotq_broker_(queued_bytes|inflight_messages|messages_dropped_total\{qos="1"|stalls_total)' | grep -v ' 0$'
curl -s "127.0.0.1:$M/debug/pprof/heap" >"$SD/heap.pb.gz"
echo "heap profile: $SD/heap.pb.gz (go tool pprof -top $BIN $SD/heap.pb.gz)"
kill "$SP" 2>/dev/null
sleep 3
echo "3 s after the subscriber left: RSS $(rss)"
kill -INT "$BP"
wait "$BP"
