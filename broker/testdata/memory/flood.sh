#!/bin/bash
# Hostile input against an iotq broker binary (flood/main.go), with RSS,
# its peak (VmHWM) and the Go heap (HeapAlloc, from --pprof) after each
# step, 10 s later, after a GC (/debug/pprof/heap?gc=1) and 30 s later.
# See docs/broker.md, "Limits".
#
# usage: flood.sh BINARY bolt|none "FLOOD FLAGS" ["FLOOD FLAGS" ...]
#   e.g. flood.sh bin/iotq bolt "-mode garbage -conns 40 -rounds 10 -hold 1s"
# Needs go (to build flood/), curl.
set -u
D=$(cd "$(dirname "$0")" && pwd)
BIN=$1 STORE=$2
shift 2
FLOOD=$(mktemp)
(cd "$D/../../.." && go build -o "$FLOOD" ./broker/testdata/memory/flood) || exit 1
P=$((20000 + RANDOM % 20000)) M=$((P + 1))
SD=$(mktemp -d)
ARGS=()
[ "$STORE" = none ] && ARGS=(--store none)
"$BIN" broker --state-dir "$SD" --listen "mqtt://127.0.0.1:$P" --metrics "127.0.0.1:$M" --pprof "${ARGS[@]}" >"$SD/log" 2>&1 &
BP=$!
for _ in $(seq 50); do curl -sf "127.0.0.1:$M/healthz" >/dev/null && break; sleep 0.2; done
st() {
	awk '/VmRSS|VmHWM/{printf "%s %.0f MB  ", $1, $2/1024}' "/proc/$BP/status"
	curl -s "127.0.0.1:$M/debug/pprof/heap?debug=1" | awk '/^# HeapAlloc/{printf "HeapAlloc %.0f MB", $4/1048576}'
	echo
}
echo "start: $(st)"
for a in "$@"; do
	# shellcheck disable=SC2086
	"$FLOOD" -addr "127.0.0.1:$P" $a
	echo "after '$a': $(st)"
done
sleep 10
echo "10 s later: $(st)"
curl -s "127.0.0.1:$M/debug/pprof/heap?gc=1" >"$SD/heap.pb.gz"
echo "after a GC: $(st)"
sleep 20
echo "30 s later: $(st)"
kill -INT "$BP"
wait "$BP"
rm -f "$FLOOD"
