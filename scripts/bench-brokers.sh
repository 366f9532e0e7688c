#!/usr/bin/env bash
# Compares iotq's broker with Mosquitto 2.0.11 from the outside (issue 12).
#
# The load comes from Mosquitto's command-line clients (mosquitto_pub -l,
# mosquitto_sub; apt package mosquitto-clients 2.0.11, installed by
# scripts/setup.sh): the same independent C client for every broker, sharing
# no code with iotq. (No benchmark tool of the package registries reachable
# here could be used: the Go proxy refuses krylovsk/mqtt-benchmark and
# zzjcool/mqtt-benchmark; emqtt-bench is in no registry here (its build
# fetches from GitHub); PyPI's pymqttbench 0.1.1 connects once per message
# and needs Python 2; crates.io's mqtt-benchmark 0.2.2 only times handing
# messages to its client library.) scripts/benchkit (a separate Go module, standard library only)
# writes the publisher's timestamped input lines, reads the subscribers'
# receive times, and holds idle connections for the memory figure.
#
# Scenarios, 100-byte payloads, MQTT 3.1.1 over TCP on loopback:
#   p2p-q0, p2p-q1      1 publisher -> 1 subscriber, as fast as it goes
#   fan20-q0, fan20-q1  1 publisher -> 20 subscribers of one topic
#   lat-p2p-q0/q1       1 -> 1 paced at LAT_RATE msg/s: latency below saturation
# Brokers: mosquitto (persistence off, max_queued_messages 1000000 so it
# does not drop), iotq (defaults: store bolt in a state dir), and for QoS 1
# also iotq-nostore (--store none, like Mosquitto's default). QUIC is not
# measured: mosquitto_pub/sub cannot speak it.
# Each broker is started by this script on a free loopback port with its own
# directory and stopped by its PID. Brokers alternate within every round
# (the order is reversed every other round). Throughput = messages received
# by all subscribers / (last receive - first send); the broker's CPU time
# (user + system, from /proc) per delivered message is printed beside it:
# on a shared machine it moves much less than the rate. In the saturated
# scenarios the latency includes the publisher's own queue (mosquitto_pub
# reads its input faster than it can send), so compare latency in lat-*.
#
# Idle memory: RSS growth of each broker over IDLE_N idle MQTT connections
# (CONNECT/CONNACK, clean session, no keepalive), and its RSS after they close.
#
# NO_NOSTORE=1 leaves iotq-nostore out (shorter runs).
# Before/after: BASE_REV=REV (a git revision) also builds iotq at REV and
# runs it as broker iotq-base (default store) beside the others, in the
# same rounds, so a change is measured side by side with its baseline.
#
# Usage: scripts/bench-brokers.sh [--quick | --tiny | --full] [--out DIR]
#        [--skip-throughput] [--skip-idle]
# Settings may also be given as environment variables (ROUNDS, P2P_MSGS,
# FAN_MSGS, FANOUT, LAT_RATE, LAT_MSGS, IDLE_N, IDLE_ROUNDS, RUN_TIMEOUT).
# Output: DIR/runs.csv (one line per run), idle.csv, summary.{md,csv,json},
# env.txt (command, machine load, versions), runs/* (raw subscriber output
# is deleted after each run unless KEEP_RAW=1).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

mode=default
out=""
do_tp=1
do_idle=1
while [ $# -gt 0 ]; do
  case "$1" in
    --quick | --tiny | --full) mode=${1#--} ;;
    --out) out=$2; shift ;;
    --skip-throughput) do_tp=0 ;;
    --skip-idle) do_idle=0 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-brokers: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

case $mode in
  tiny)    d_rounds=1 d_p2p=2000   d_fan=200   d_fanout=3  d_lat=300   d_rate=1000 d_idle=50    d_iround=1 ;;
  quick)   d_rounds=3 d_p2p=20000  d_fan=2000  d_fanout=20 d_lat=4000  d_rate=2000 d_idle=2000  d_iround=2 ;;
  default) d_rounds=3 d_p2p=60000  d_fan=10000 d_fanout=20 d_lat=10000 d_rate=2000 d_idle=2000  d_iround=3 ;;
  full)    d_rounds=5 d_p2p=60000  d_fan=20000 d_fanout=20 d_lat=20000 d_rate=2000 d_idle=10000 d_iround=3 ;;
esac
ROUNDS=${ROUNDS:-$d_rounds}
P2P_MSGS=${P2P_MSGS:-$d_p2p}
FAN_MSGS=${FAN_MSGS:-$d_fan}
FANOUT=${FANOUT:-$d_fanout}
LAT_MSGS=${LAT_MSGS:-$d_lat}
LAT_RATE=${LAT_RATE:-$d_rate}
IDLE_N=${IDLE_N:-$d_idle}
IDLE_ROUNDS=${IDLE_ROUNDS:-$d_iround}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
SIZE=100
# mosquitto_pub -l waits for the acknowledgement of its last message by
# packet identifier, which wraps at 65535: with more QoS 1 messages it
# disconnects early and the rest are lost (measured: 34 466 of 100 000).
for v in P2P_MSGS FAN_MSGS LAT_MSGS; do
  if [ "${!v}" -gt 65000 ]; then
    echo "bench-brokers: $v=${!v}: at most 65000 (mosquitto_pub -l loses QoS 1 messages past 65535 packet ids)" >&2
    exit 2
  fi
done
out=${out:-results/bench-brokers-$(date -u +%Y%m%dT%H%M%SZ)}

for tool in mosquitto mosquitto_pub mosquitto_sub go; do
  command -v $tool >/dev/null || [ -x /usr/sbin/$tool ] || {
    echo "bench-brokers: $tool not found; run scripts/setup.sh first" >&2; exit 1; }
done
mosquitto_bin=$(command -v mosquitto || echo /usr/sbin/mosquitto)

mkdir -p "$out/runs" "$out/bin"
out=$(cd "$out" && pwd)
echo "bench-brokers: building iotq and benchkit into $out/bin" >&2
go build -o "$out/bin/iotq" ./cmd/iotq
(cd scripts/benchkit && go build -o "$out/bin/benchkit" .)
iotq="$out/bin/iotq"
bk="$out/bin/benchkit"
base=""
if [ -n "${BASE_REV:-}" ]; then
  echo "bench-brokers: building iotq at $BASE_REV into $out/bin/iotq-base" >&2
  rm -rf "$out/base-src"
  git worktree add --detach "$out/base-src" "$BASE_REV" >/dev/null 2>&1 || {
    echo "bench-brokers: cannot check out $BASE_REV" >&2; exit 1; }
  (cd "$out/base-src" && go build -o "$out/bin/iotq-base" ./cmd/iotq)
  git worktree remove --force "$out/base-src"
  base=iotq-base
fi

# Many idle connections need file descriptors (brokers inherit the limit).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

{
  echo "command: scripts/bench-brokers.sh $mode BASE_REV=${BASE_REV:-} ROUNDS=$ROUNDS P2P_MSGS=$P2P_MSGS FAN_MSGS=$FAN_MSGS FANOUT=$FANOUT LAT_MSGS=$LAT_MSGS LAT_RATE=$LAT_RATE IDLE_N=$IDLE_N IDLE_ROUNDS=$IDLE_ROUNDS"
  echo "date: $(date -u +%FT%TZ)"
  echo "git: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
  echo "host: $(uname -sr), $(nproc) cores, $(awk '/MemTotal/{printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
  echo "go: $(go version)"
  echo "mosquitto: $("$mosquitto_bin" -h 2>&1 | head -1)"
  echo "clients: $(mosquitto_pub --help 2>&1 | sed -n 2p)"
  echo "tcp_congestion_control: $(cat /proc/sys/net/ipv4/tcp_congestion_control)"
  echo "fd limit: $(ulimit -n)"
  echo "loadavg before: $(cat /proc/loadavg)"
} > "$out/env.txt"

# --- brokers ------------------------------------------------------------
bpid=""
bport=""

# start_broker NAME DIR: starts the broker, sets bpid and bport.
start_broker() {
  local name=$1 dir=$2
  mkdir -p "$dir"
  bport=$("$bk" freeport)
  case $name in
    mosquitto)
      cat > "$dir/mosquitto.conf" <<EOF
listener $bport 127.0.0.1
allow_anonymous true
persistence false
max_queued_messages 1000000
log_dest stderr
log_type error
log_type warning
EOF
      "$mosquitto_bin" -c "$dir/mosquitto.conf" > "$dir/broker.log" 2>&1 &
      bpid=$!
      ;;
    iotq | iotq-nostore | iotq-base)
      local extra=() bin=$iotq
      [ "$name" = iotq-nostore ] && extra=(--store none)
      [ "$name" = iotq-base ] && bin="$out/bin/iotq-base"
      "$bin" broker --listen "mqtt://127.0.0.1:$bport" --state-dir "$dir/state" \
        --log-level warn "${extra[@]}" > "$dir/broker.log" 2>&1 &
      bpid=$!
      ;;
    *) echo "bench-brokers: unknown broker $name" >&2; exit 1 ;;
  esac
  if ! "$bk" waitport -addr "127.0.0.1:$bport" -timeout 20s; then
    echo "bench-brokers: $name did not start; its log:" >&2
    cat "$dir/broker.log" >&2
    stop_broker
    exit 1
  fi
}

stop_broker() {
  [ -n "$bpid" ] || return 0
  kill -TERM "$bpid" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 "$bpid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$bpid" 2>/dev/null || true
  wait "$bpid" 2>/dev/null || true
  bpid=""
}

rss_kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
# cpu_ticks PID: user + system CPU time of the process, in clock ticks.
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
clk_tck=$(getconf CLK_TCK)

sub_pids=()
cleanup() {
  for p in "${sub_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  stop_broker
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- throughput and latency -------------------------------------------
# run_one ROUND SCENARIO BROKER QOS SUBS MSGS RATE
run_one() {
  local round=$1 scen=$2 broker=$3 qos=$4 subs=$5 msgs=$6 rate=$7
  local dir="$out/runs/$round-$scen-$broker"
  start_broker "$broker" "$dir"
  sub_pids=()
  local i files=()
  for ((i = 0; i < subs; i++)); do
    local fmt='%U'
    [ $i -eq 0 ] && fmt='%U %p'
    mosquitto_sub -h 127.0.0.1 -p "$bport" -i "bsub$i" -t bench/t -q "$qos" -C "$msgs" \
      -W "$RUN_TIMEOUT" -F "$fmt" > "$dir/sub$i.txt" 2> "$dir/sub$i.err" &
    sub_pids+=($!)
    files+=("$dir/sub$i.txt")
  done
  sleep 1 # let every subscription reach the broker
  local cpu0
  cpu0=$(cpu_ticks "$bpid")
  timeout "$RUN_TIMEOUT" bash -c '"$1" gen -delay 500ms -n "$2" -size "$3" -rate "$4" |
    mosquitto_pub -h 127.0.0.1 -p "$5" -i bpub -t bench/t -q "$6" -l' _ \
    "$bk" "$msgs" "$SIZE" "$rate" "$bport" "$qos" 2> "$dir/pub.err" || echo "publisher failed or timed out: see $dir/pub.err" >&2
  # Subscribers stop by themselves after MSGS messages; wait up to 10 s
  # for stragglers (lost messages), then stop them.
  local deadline=$((SECONDS + 10))
  for p in "${sub_pids[@]}"; do
    while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.05; done
    kill -TERM "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  sub_pids=()
  local peak cpu
  peak=$(rss_kb "$bpid" VmHWM)
  cpu=$(awk -v a="$cpu0" -v b="$(cpu_ticks "$bpid")" -v t="$clk_tck" 'BEGIN {printf "%.2f", (b - a) / t}')
  stop_broker
  local lat expected
  lat=$("$bk" lat -csv "${files[@]}")
  expected=$((msgs * subs))
  echo "$round,$scen,$broker,$qos,$subs,$msgs,$expected,$lat,$peak,$cpu" |
    awk -F, -v OFS=, '{lost = ($7 - $8) * 100 / $7; perMsg = $8 > 0 ? $17 * 1e6 / $8 : 0
      print $1,$2,$3,$4,$5,$6,$7,$8,sprintf("%.3f", lost),$10,$11,$12,$13,$14,$15,$16,$17,sprintf("%.2f", perMsg)}' >> "$out/runs.csv"
  tail -1 "$out/runs.csv" | awk -F, '{printf "  %-10s %-13s received %d/%d (lost %s%%) %8.0f msg/s  p50 %.0f us  p99 %.0f us  peak RSS %d KiB  CPU %.2f us/msg\n", $2, $3, $8, $7, $9, $11, $12, $14, $16, $18}' >&2
  [ "${KEEP_RAW:-0}" = 1 ] || rm -f "${files[@]}"
}

if [ $do_tp = 1 ]; then
  echo "round,scenario,broker,qos,subs,published,expected,received,lost_pct,seconds,msgs_per_s,p50_us,p90_us,p99_us,max_us,peak_rss_kb,broker_cpu_s,cpu_us_per_msg" > "$out/runs.csv"
  nostore=iotq-nostore
  [ "${NO_NOSTORE:-0}" = 1 ] && nostore=""
  # scenario qos subs msgs rate brokers...
  scenarios=(
    "p2p-q0 0 1 $P2P_MSGS 0 mosquitto iotq $base"
    "p2p-q1 1 1 $P2P_MSGS 0 mosquitto iotq $nostore $base"
    "fan$FANOUT-q0 0 $FANOUT $FAN_MSGS 0 mosquitto iotq $base"
    "fan$FANOUT-q1 1 $FANOUT $FAN_MSGS 0 mosquitto iotq $nostore $base"
    "lat-p2p-q0 0 1 $LAT_MSGS $LAT_RATE mosquitto iotq $base"
    "lat-p2p-q1 1 1 $LAT_MSGS $LAT_RATE mosquitto iotq $nostore $base"
  )
  for ((r = 1; r <= ROUNDS; r++)); do
    echo "bench-brokers: round $r/$ROUNDS (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    for s in "${scenarios[@]}"; do
      read -r scen qos subs msgs rate brokers <<< "$s"
      read -ra order <<< "$brokers"
      if [ $((r % 2)) -eq 0 ]; then
        for ((i = ${#order[@]} - 1; i >= 0; i--)); do run_one "$r" "$scen" "${order[$i]}" "$qos" "$subs" "$msgs" "$rate"; done
      else
        for b in "${order[@]}"; do run_one "$r" "$scen" "$b" "$qos" "$subs" "$msgs" "$rate"; done
      fi
    done
  done
fi

# --- idle memory --------------------------------------------------------
if [ $do_idle = 1 ]; then
  echo "round,broker,n,rss_before_kb,rss_connected_kb,rss_after_close_kb" > "$out/idle.csv"
  for ((r = 1; r <= IDLE_ROUNDS; r++)); do
    for broker in mosquitto iotq $base; do
      dir="$out/runs/idle-$r-$broker"
      start_broker "$broker" "$dir"
      sleep 1
      before=$(rss_kb "$bpid" VmRSS)
      rm -f "$dir/hold"
      mkfifo "$dir/hold"
      "$bk" idle -addr "127.0.0.1:$bport" -n "$IDLE_N" -prefix "idle$r" < "$dir/hold" > "$dir/idle.out" 2> "$dir/idle.err" &
      ipid=$!
      exec 9> "$dir/hold"
      deadline=$((SECONDS + RUN_TIMEOUT))
      while ! grep -q connected "$dir/idle.out" 2>/dev/null; do
        if ! kill -0 "$ipid" 2>/dev/null || [ $SECONDS -ge $deadline ]; then
          echo "bench-brokers: idle clients failed against $broker: $(cat "$dir/idle.err")" >&2
          exec 9>&-
          exit 1
        fi
        sleep 0.1
      done
      sleep 2
      connected=$(rss_kb "$bpid" VmRSS)
      exec 9>&- # end of input: benchkit closes the connections
      wait "$ipid" || true
      sleep 3
      after=$(rss_kb "$bpid" VmRSS)
      stop_broker
      echo "$r,$broker,$IDLE_N,$before,$connected,$after" >> "$out/idle.csv"
      echo "  idle $broker: $IDLE_N connections: RSS $before -> $connected KiB ($(( (connected - before) / IDLE_N )) KiB each), $after KiB after close" >&2
    done
  done
fi

echo "loadavg after: $(cat /proc/loadavg)" >> "$out/env.txt"
echo >&2
cat "$out/env.txt" >&2
echo >&2
"$bk" summarize -dir "$out"
echo "bench-brokers: results in $out" >&2
