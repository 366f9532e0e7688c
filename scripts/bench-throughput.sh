#!/usr/bin/env bash
# Broker throughput, latency and idle memory from the outside (issue 21).
#
# Load generator: the Rust mqtt5 client's benchmark, mqttv5-cli 0.29.9
# (`mqttv5 bench`, installed by scripts/setup.sh), the same binary for
# every broker, on loopback only. Brokers, each started by this script on a
# free loopback port with its own temporary directory and stopped by its
# PID, one fresh broker process per run:
#   mosquitto         Mosquitto (persistence false, max_queued_messages
#                     1000000 so it does not drop)
#   iotq-mqtt-none    iotq broker, mqtt://, --store none
#   iotq-mqtt-bolt    iotq broker, mqtt://, default bolt store (--state-dir)
#   iotq-quic-none    iotq broker, quic://, --store none (its generated CA)
#   mqtt5-tcp         mqttv5 broker over TCP (--no-persistence)
#   mqtt5-quic        mqttv5 broker over QUIC (a throwaway CA and server
#                     certificate made with openssl at run time)
# IOTQ=PATH is the iotq binary (default bin/iotq). IOTQ_BASE=PATH adds the
# same three iotq rows for a baseline build (base-mqtt-none, base-mqtt-bolt,
# base-quic-none), in the same rounds, so two builds compare side by side.
#
# Throughput loads (delivered messages per second: mqttv5's throughput_avg):
#   mqttv5 bench --mode throughput --duration 6 --warmup 1 --payload-size 100
#     --publishers 1 --subscribers 1|20 -q 0|1 --url URL
#   loads p2p-q0, p2p-q1 (1 -> 1), fan20-q0, fan20-q1 (1 -> 20).
# mqttv5 0.29.9 keeps --inflight (32) QoS 1 publishes in flight per
# publisher connection and its subscribers subscribe at the load's QoS, so a
# q1 load is QoS 1 on both legs; throughput_avg is the mean of the
# per-second delivered counts after the warm-up, one second dropped at each
# end (--steady-trim 0.1).
# Each run also records the CPU seconds (user + system) the broker used
# during the run (/proc/PID/stat) and those of the mqttv5 process
# (/usr/bin/time), with its wall time: a load generator near 2 CPU seconds
# per wall second on 2 cores is the bottleneck, not the broker; and the
# broker's read and write system calls (/proc/PID/io syscr, syscw;
# Mosquitto and iotq over mqtt:// only: the other brokers' socket calls are
# not counted there), per delivered message in summary.md:
# how much each call carries. For iotq
# brokers (started with --metrics) it also records the broker's own count:
# PUBLISH packets it wrote to subscribers per second (the median over the
# run's busy seconds, ramps left out, of iotq_broker_messages_sent_total,
# read every 0.5 s),
# so a load generator that counts fewer than the broker sent shows as such
# (the sampler, curl twice a second, costs about 1 % of a core and counts in
# iotq's broker CPU seconds, not in the other brokers'; latency runs are not
# sampled).
# Latency: mqttv5 bench --mode latency --rate 10000 (paced, delay measured
# from each message's scheduled send time), QoS 0 and 1, 1 -> 1, p50/p95/p99,
# for mosquitto, iotq-mqtt-none and iotq-mqtt-bolt (and the base rows).
# Brokers alternate within each round, the order reversed every other round.
# Idle memory: RSS growth per connection at IDLE_N idle connections
# (CONNECT/CONNACK, clean session, no keep-alive; QUIC clients send QUIC
# keep-alives), Mosquitto and iotq over TCP, iotq over QUIC (iotq with
# --store none): go test ./broker -bench IdleConnectionMemory, compiled once,
# run with IOTQ_BIN (each iotq build) and IOTQ_IDLE_SCHEMES; the clients
# live in the test process, the broker is a separate process.
#
# Profiles (PROFILE=1): after the measured rounds, one more throughput run
# per iotq broker and load, with the broker started with --pprof and a CPU
# profile of its busy seconds (DURATION - 1 s, from the end of the
# warm-up) taken over /debug/pprof/profile; these runs count in no median
# (profiling costs the broker a few per cent). Output profiles/BROKER-LOAD
# .cpu.pb.gz and .top.txt (go tool pprof -top, by flat and by cumulative
# time): where the broker's CPU goes on each load, the evidence for a
# target the medians miss.
#
# Usage: scripts/bench-throughput.sh [--tiny] [--out DIR] [--skip-throughput]
#        [--skip-latency] [--skip-idle]
#   --tiny   1 round, --duration 1 --warmup 0, 200 idle connections: checks
#            the script end to end in about two minutes (figures meaningless)
# Settings (environment): IOTQ, IOTQ_BASE, ROUNDS (3), DURATION (6),
# WARMUP (1), PAYLOAD (100), FANOUT (20), LAT_RATE (10000), IDLE_N (10000),
# IDLE_ROUNDS (= ROUNDS), IDLE_SETTLE (15s: when RSS is read after the last
# CONNACK), RUN_TIMEOUT (seconds per bench run, 60),
# IDLE_TIMEOUT (seconds per idle run, 600), BROKERS (space-separated subset
# of the names above, default all), KEEP_RAW=0 (drop mqttv5's JSON),
# PROFILE=1 (the profiled runs above), PIN=1 (below).
# Pinned runs (PIN=1): every broker runs on the CPUs BROKER_CPUS (default
# 0) and mqttv5 on LOADGEN_CPUS (default 1), with taskset, in throughput,
# profiled and latency runs (not the idle runs). On 2 cores the broker and
# the load generator otherwise take CPU from each other, and a broker that
# sends faster than mqttv5 reads leaves it less CPU to count with: pinned,
# each has a core of its own, and a load generator at 1 CPU second per
# wall second on its core is the limit. iotq (Go) then runs with
# GOMAXPROCS 1, Mosquitto is single-threaded either way.
# Output (--out, default docs/bench/throughput-DATE):
#   runs.csv     one row per throughput run: round, broker, load, qos,
#                subscribers, msgs_per_s, broker_cpu_s, loadgen_cpu_s, ...
#   latency.csv  one row per latency run; idle.csv one row per broker and round
#   summary.md, summary.json  medians, min-max, ratios, the targets of issue 21,
#                host facts (nproc, load average before/after), versions,
#                iotq's commit and the exact commands
#   commands.txt every command run, in order; raw/ mqttv5's JSON per run
# Progress goes to standard error. Exit status 1 if any run failed (the
# summary is still written).
set -euo pipefail
self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$self")/.."
repo=$(pwd)

tiny=0
out=""
do_tp=1
do_lat=1
do_idle=1
while [ $# -gt 0 ]; do
  case "$1" in
    --tiny) tiny=1 ;;
    --out) [ $# -ge 2 ] || { echo "bench-throughput: --out needs a directory" >&2; exit 2; }; out=$2; shift ;;
    --skip-throughput) do_tp=0 ;;
    --skip-latency) do_lat=0 ;;
    --skip-idle) do_idle=0 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$self" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-throughput: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

if [ $tiny = 1 ]; then
  d_rounds=1 d_duration=1 d_warmup=0 d_idle=200
else
  d_rounds=3 d_duration=6 d_warmup=1 d_idle=10000
fi
ROUNDS=${ROUNDS:-$d_rounds}
DURATION=${DURATION:-$d_duration}
WARMUP=${WARMUP:-$d_warmup}
PAYLOAD=${PAYLOAD:-100}
FANOUT=${FANOUT:-20}
LAT_RATE=${LAT_RATE:-10000}
IDLE_N=${IDLE_N:-$d_idle}
IDLE_ROUNDS=${IDLE_ROUNDS:-$ROUNDS}
RUN_TIMEOUT=${RUN_TIMEOUT:-60}
IDLE_TIMEOUT=${IDLE_TIMEOUT:-600}
# RSS is read IDLE_SETTLE after the last CONNACK: long enough for an idle
# broker to reach its steady state (iotq returns free memory to the OS
# about 10 s after its last garbage collection; at 2 s the figure still
# holds the connection burst's garbage). Every broker is read the same way.
IDLE_SETTLE=${IDLE_SETTLE:-15s}
KEEP_RAW=${KEEP_RAW:-1}
PROFILE=${PROFILE:-0}
PIN=${PIN:-0}
BROKER_CPUS=${BROKER_CPUS:-0}
LOADGEN_CPUS=${LOADGEN_CPUS:-1}
IOTQ=${IOTQ:-bin/iotq}
IOTQ_BASE=${IOTQ_BASE:-}
for v in ROUNDS DURATION WARMUP PAYLOAD FANOUT LAT_RATE IDLE_N IDLE_ROUNDS RUN_TIMEOUT IDLE_TIMEOUT PROFILE PIN; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "bench-throughput: $v=${!v}: want a whole number" >&2; exit 2; }
done
pin_broker=() pin_load=()
if [ "$PIN" = 1 ]; then
  for v in BROKER_CPUS LOADGEN_CPUS; do
    [[ ${!v} =~ ^[0-9]+([,-][0-9]+)*$ ]] || { echo "bench-throughput: $v=${!v}: want a CPU list for taskset -c (0, 1, 0-1)" >&2; exit 2; }
  done
  command -v taskset > /dev/null || { echo "bench-throughput: PIN=1 needs taskset (util-linux)" >&2; exit 1; }
  pin_broker=(taskset -c "$BROKER_CPUS")
  pin_load=(taskset -c "$LOADGEN_CPUS")
fi
if [ "$PROFILE" = 1 ] && [ "$DURATION" -lt 2 ]; then
  echo "bench-throughput: PROFILE=1 needs DURATION of 2 s or more (the profile covers DURATION - 1 s)" >&2
  exit 2
fi
if [ "$RUN_TIMEOUT" -le $((DURATION + WARMUP + 5)) ]; then
  echo "bench-throughput: RUN_TIMEOUT=$RUN_TIMEOUT is too short for DURATION=$DURATION + WARMUP=$WARMUP" >&2
  exit 2
fi
out=${out:-docs/bench/throughput-$(date -u +%F)}

# --- tools ------------------------------------------------------------
abspath() { case $1 in /*) echo "$1" ;; *) echo "$repo/$1" ;; esac; }
IOTQ=$(abspath "$IOTQ")
[ -x "$IOTQ" ] || { echo "bench-throughput: IOTQ=$IOTQ is not an executable (go build -o bin/iotq ./cmd/iotq)" >&2; exit 1; }
if [ -n "$IOTQ_BASE" ]; then
  IOTQ_BASE=$(abspath "$IOTQ_BASE")
  [ -x "$IOTQ_BASE" ] || { echo "bench-throughput: IOTQ_BASE=$IOTQ_BASE is not an executable" >&2; exit 1; }
fi
mosquitto_bin=$(command -v mosquitto || echo /usr/sbin/mosquitto)
mqttv5_bin=$(command -v mqttv5 || echo "$HOME/.cargo/bin/mqttv5")
for tool in "$mosquitto_bin" "$mqttv5_bin" /usr/bin/time openssl ss timeout python3 go curl; do
  command -v "$tool" > /dev/null || {
    echo "bench-throughput: $tool not found; run scripts/setup.sh first" >&2; exit 1; }
done

all_brokers="mosquitto iotq-mqtt-none iotq-mqtt-bolt iotq-quic-none mqtt5-tcp mqtt5-quic"
[ -n "$IOTQ_BASE" ] && all_brokers="$all_brokers base-mqtt-none base-mqtt-bolt base-quic-none"
read -ra brokers <<< "${BROKERS:-$all_brokers}"
for b in "${brokers[@]}"; do
  case " $all_brokers " in *" $b "*) ;; *)
    echo "bench-throughput: BROKERS: unknown broker $b (known: $all_brokers; base-* need IOTQ_BASE)" >&2; exit 2 ;;
  esac
done
lat_brokers=()
for b in "${brokers[@]}"; do
  case $b in mosquitto | iotq-mqtt-* | base-mqtt-*) lat_brokers+=("$b") ;; esac
done
# load name, QoS, subscribers
loads=("p2p-q0 0 1" "p2p-q1 1 1" "fan$FANOUT-q0 0 $FANOUT" "fan$FANOUT-q1 1 $FANOUT")

# Many idle connections need file descriptors (the test process holds the
# clients, the broker one per client; both inherit this limit).
ulimit -n "$(ulimit -Hn)" 2> /dev/null || true
if [ $do_idle = 1 ] && [ "$IDLE_N" -gt $(($(ulimit -n) - 200)) ]; then
  echo "bench-throughput: IDLE_N=$IDLE_N needs more file descriptors than the limit $(ulimit -n) allows" >&2
  exit 2
fi

mkdir -p "$out/raw"
out=$(cd "$out" && pwd)
tmp=$(mktemp -d /tmp/bench-throughput.XXXXXX)
rm -f "$out/commands.txt"

n_tp=0 n_lat=0 n_idle=0
[ $do_tp = 1 ] && n_tp=$((ROUNDS * ${#loads[@]} * ${#brokers[@]}))
[ $do_lat = 1 ] && n_lat=$((ROUNDS * 2 * ${#lat_brokers[@]}))
if [ $do_idle = 1 ]; then
  n_idle=$IDLE_ROUNDS
  [ -n "$IOTQ_BASE" ] && n_idle=$((IDLE_ROUNDS * 2))
fi
n_prof=0
if [ $do_tp = 1 ] && [ "$PROFILE" = 1 ]; then
  for b in "${brokers[@]}"; do
    case $b in iotq-* | base-*) n_prof=$((n_prof + ${#loads[@]})) ;; esac
  done
fi
total=$((n_tp + n_lat + n_idle + n_prof))
done_runs=0
failed=0

# --- host facts -----------------------------------------------------------
git_rev=$(git rev-parse HEAD 2> /dev/null || echo unknown)
git diff --quiet HEAD 2> /dev/null || git_rev="$git_rev (dirty)"
{
  echo "command: IOTQ=$IOTQ IOTQ_BASE=$IOTQ_BASE ROUNDS=$ROUNDS DURATION=$DURATION WARMUP=$WARMUP PAYLOAD=$PAYLOAD FANOUT=$FANOUT LAT_RATE=$LAT_RATE IDLE_N=$IDLE_N IDLE_ROUNDS=$IDLE_ROUNDS PROFILE=$PROFILE PIN=$PIN$([ "$PIN" = 1 ] && echo " BROKER_CPUS=$BROKER_CPUS LOADGEN_CPUS=$LOADGEN_CPUS") BROKERS='${brokers[*]}' scripts/bench-throughput.sh$([ $tiny = 1 ] && echo ' --tiny')$([ $do_tp = 0 ] && echo ' --skip-throughput')$([ $do_lat = 0 ] && echo ' --skip-latency')$([ $do_idle = 0 ] && echo ' --skip-idle')"
  echo "date: $(date -u +%FT%TZ)"
  echo "tiny: $tiny"
  echo "repo commit: $git_rev"
  echo "iotq: $IOTQ: $("$IOTQ" version 2> /dev/null | head -1), sha256 $(sha256sum "$IOTQ" | cut -c1-16)"
  [ -n "$IOTQ_BASE" ] && echo "iotq base: $IOTQ_BASE: $("$IOTQ_BASE" version 2> /dev/null | head -1), sha256 $(sha256sum "$IOTQ_BASE" | cut -c1-16)"
  echo "mosquitto: $("$mosquitto_bin" -h 2>&1 | head -1)"
  echo "mqttv5: $("$mqttv5_bin" --version 2>&1 | head -1) (load generator and mqtt5 broker)"
  echo "go: $(go version)"
  echo "host: $(uname -sr), nproc $(nproc), $(awk '/MemTotal/{printf "%.1f GiB", $2/1048576}' /proc/meminfo), $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)"
  echo "tcp_congestion_control: $(cat /proc/sys/net/ipv4/tcp_congestion_control)"
  echo "fd limit: $(ulimit -n)"
  echo "loadavg before: $(cat /proc/loadavg)"
} > "$out/env.txt"

# --- brokers ------------------------------------------------------------
bpid=""   # PID of the running broker
burl=""   # URL mqttv5 bench connects to
bca=()    # --ca-cert FILE for TLS (QUIC) brokers
bmetrics="" # iotq brokers: host:port of their /metrics
bcmd=""   # the broker's command line, for commands.txt
profiling=0 # 1 while the profiled runs run: iotq brokers get --pprof
used_ports=" "

# free_port: sets fport to a loopback port no TCP or UDP socket listens
# on, below the ephemeral range so that client sockets do not take it
# meanwhile, and not handed out before by this script.
fport=""
free_port() {
  local p
  for _ in $(seq 200); do
    p=$((10000 + RANDOM % 22000))
    case $used_ports in *" $p "*) continue ;; esac
    if [ -z "$(ss -Hlntu "sport = :$p" 2> /dev/null)" ]; then
      used_ports="$used_ports$p "
      fport=$p
      return 0
    fi
  done
  echo "bench-throughput: no free port found" >&2
  return 1
}

# listening PORT tcp|udp: true once a socket listens there.
listening() {
  if [ "$2" = udp ]; then
    [ -n "$(ss -Hlnu "sport = :$1" 2> /dev/null)" ]
  else
    [ -n "$(ss -Hlnt "sport = :$1" 2> /dev/null)" ]
  fi
}

# mqtt5_certs DIR: a throwaway CA and a server certificate for 127.0.0.1
# (rustls refuses a CA certificate as the server's own).
mqtt5_certs() {
  local d=$1
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=bench-throughput-ca -keyout "$d/ca.key" -out "$d/ca.pem" 2> /dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=127.0.0.1 \
    -keyout "$d/key.pem" -out "$d/server.csr" 2> /dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n' > "$d/ext.cnf"
  openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
    -days 2 -extfile "$d/ext.cnf" -out "$d/cert.pem" 2> /dev/null
}

# start_broker NAME DIR: starts it, sets bpid, burl, bca and bcmd.
start_broker() {
  local name=$1 dir=$2 port wait_proto=tcp
  mkdir -p "$dir"
  free_port
  port=$fport
  bca=()
  bmetrics=""
  case $name in
    mosquitto)
      cat > "$dir/mosquitto.conf" << EOF
listener $port 127.0.0.1
allow_anonymous true
persistence false
max_queued_messages 1000000
log_dest stderr
log_type error
log_type warning
EOF
      bcmd="${pin_broker[*]}${pin_broker[*]:+ }$mosquitto_bin -c $dir/mosquitto.conf  # mosquitto.conf: $(paste -sd';' "$dir/mosquitto.conf" | sed 's/;/; /g')"
      "${pin_broker[@]}" "$mosquitto_bin" -c "$dir/mosquitto.conf" > "$dir/broker.log" 2>&1 &
      bpid=$!
      burl="mqtt://127.0.0.1:$port"
      ;;
    iotq-* | base-*)
      local bin=$IOTQ scheme=mqtt store=none
      case $name in base-*) bin=$IOTQ_BASE ;; esac
      case $name in *-quic-*) scheme=quic wait_proto=udp ;; esac
      case $name in *-bolt) store=bolt ;; esac
      free_port
      bmetrics="127.0.0.1:$fport"
      local args=(broker --listen "$scheme://127.0.0.1:$port" --state-dir "$dir/state"
        --store "$store" --log-level warn --ready-file "$dir/ready.json" --metrics "$bmetrics")
      [ "$profiling" = 1 ] && args+=(--pprof)
      bcmd="${pin_broker[*]}${pin_broker[*]:+ }$bin ${args[*]}"
      "${pin_broker[@]}" "$bin" "${args[@]}" > "$dir/broker.log" 2>&1 &
      bpid=$!
      burl="$scheme://127.0.0.1:$port"
      [ $scheme = quic ] && bca=(--ca-cert "$dir/state/tls/ca.pem")
      ;;
    mqtt5-tcp | mqtt5-quic)
      local args=(broker --host "127.0.0.1:$port" --no-persistence --storage-dir "$dir/storage"
        --allow-anonymous true --non-interactive)
      burl="mqtt://127.0.0.1:$port"
      if [ "$name" = mqtt5-quic ]; then
        mqtt5_certs "$dir"
        local qport tport
        free_port
        qport=$fport
        free_port
        tport=$fport
        # --tls-host: with a certificate it would otherwise also listen on 0.0.0.0:8883.
        args+=(--quic-host "127.0.0.1:$qport" --tls-host "127.0.0.1:$tport"
          --tls-cert "$dir/cert.pem" --tls-key "$dir/key.pem")
        burl="quic://127.0.0.1:$qport"
        bca=(--ca-cert "$dir/ca.pem")
        port=$qport wait_proto=udp
      fi
      bcmd="${pin_broker[*]}${pin_broker[*]:+ }$mqttv5_bin ${args[*]}"
      "${pin_broker[@]}" "$mqttv5_bin" "${args[@]}" > "$dir/broker.log" 2>&1 &
      bpid=$!
      ;;
    *) echo "bench-throughput: unknown broker $name" >&2; exit 1 ;;
  esac
  local deadline=$((SECONDS + 30))
  while :; do
    if ! kill -0 "$bpid" 2> /dev/null || [ $SECONDS -ge $deadline ]; then
      echo "bench-throughput: $name did not start ($bcmd); its log:" >&2
      cat "$dir/broker.log" >&2
      stop_broker
      exit 1
    fi
    case $name in
      iotq-* | base-*) [ -s "$dir/ready.json" ] && break ;;
      *) listening "$port" "$wait_proto" && break ;;
    esac
    sleep 0.05
  done
}

# stop_broker: SIGTERM to the broker's PID, SIGKILL after 10 s.
stop_broker() {
  [ -n "$bpid" ] || return 0
  kill -TERM "$bpid" 2> /dev/null || true
  for _ in $(seq 100); do
    kill -0 "$bpid" 2> /dev/null || break
    sleep 0.1
  done
  kill -KILL "$bpid" 2> /dev/null || true
  wait "$bpid" 2> /dev/null || true
  bpid=""
}

# cpu_ticks PID: user + system CPU time of the process, in clock ticks.
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
# io_calls PID: the process's read and write system calls so far
# (/proc/PID/io syscr, syscw: read, readv, write, writev ...; a read that
# finds nothing counts too; socket calls such as recv, send (the mqtt5
# broker's, tokio) and recvmmsg, sendmsg (quic-go's) do not count).
io_calls() { awk '/^syscr:/ {r = $2} /^syscw:/ {w = $2} END {print r + 0, w + 0}' "/proc/$1/io" 2> /dev/null || echo "0 0"; }
clk_tck=$(getconf CLK_TCK)

# timed commands run in the background (timeout puts them in a process
# group of their own) so that a signal to this script stops them at once.
tpid=""
spid="" # the /metrics sampler
run_timed() { # SECONDS CMD...: runs CMD under timeout, returns its status
  local t=$1
  shift
  timeout -k 5 "$t" "$@" &
  tpid=$!
  local rc=0
  wait "$tpid" || rc=$?
  tpid=""
  return $rc
}

cleanup() {
  [ -z "$tpid" ] || kill -TERM "$tpid" 2> /dev/null || true
  stop_sampler
  stop_broker
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

progress() {
  done_runs=$((done_runs + 1))
  echo "bench-throughput: [$done_runs/$total] $*" >&2
}

# sample_sent ADDR FILE: every 0.5 s, a line "UNIX_SECONDS COUNT" with the
# broker's iotq_broker_messages_sent_total (all QoS), until stopped.
sample_sent() {
  local c
  while :; do
    # a failed or timed-out read writes no count (a 0 would make a window
    # from 0 to the running total); the time is taken after the read
    c=$(curl -s --max-time 1 "http://$1/metrics" |
      awk '/^iotq_broker_messages_sent_total/ {s += $2; n++} END {if (n) printf "%.0f", s}')
    printf '%s %s\n' "$(date +%s.%N)" "$c" >> "$2"
    sleep 0.5
  done
}
stop_sampler() {
  [ -n "$spid" ] || return 0
  kill "$spid" 2> /dev/null || true
  wait "$spid" 2> /dev/null || true
  spid=""
}

# sent_rate FILE: the median of the per-second rates between samples one
# second apart while the count grew, the ramps at both ends left out ("" without
# samples).
sent_rate() {
  [ -s "$1" ] || return 0
  python3 - "$1" << 'EOF'
import statistics, sys
s = []
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) == 2 and p[1]:
        s.append((float(p[0]), float(p[1])))
r = []
for i, (t0, c0) in enumerate(s):
    for t1, c1 in s[i + 1:]:
        if t1 - t0 >= 0.95:
            if c1 > c0:
                r.append((c1 - c0) / (t1 - t0))
            break
# The first and last two windows straddle the start and the end.
r = r[2:-2] if len(r) > 6 else r
print(f"{statistics.median(r):.0f}" if r else "")
EOF
}

# bench ROUND KIND BROKER LOAD QOS SUBS: one mqttv5 bench run against a
# fresh broker. Sets r_json, r_bcpu, r_lcpu, r_lwall, r_bsent, r_breads,
# r_bwrites (the broker's read and write system calls during the run),
# r_status.
bench() {
  local round=$1 kind=$2 broker=$3 load=$4 qos=$5 subs=$6
  local id="$round-$kind-$load-$broker"
  local dir="$tmp/$id"
  start_broker "$broker" "$dir"
  local args=(bench --duration "$DURATION" --warmup "$WARMUP" --payload-size "$PAYLOAD" -q "$qos"
    --url "$burl" "${bca[@]}")
  if [ "$kind" = tp ]; then
    args=(bench --mode throughput "${args[@]:1}" --publishers 1 --subscribers "$subs")
  else
    args=(bench --mode latency "${args[@]:1}" --rate "$LAT_RATE")
  fi
  local key=$load
  case $burl in quic://*) key="$load, QUIC brokers" ;; esac
  printf '%s\tbroker\t%s\t%s\n%s\tload\t%s\t%s%s %s\n' "$id" "$broker" "$bcmd" "$id" "$key" "${pin_load[*]}${pin_load[*]:+ }" "$mqttv5_bin" "${args[*]}" >> "$out/commands.txt"
  r_json="$out/raw/$id.json"
  local c0 c1 io0 io1
  c0=$(cpu_ticks "$bpid")
  io0=$(io_calls "$bpid")
  r_status=ok
  if [ -n "$bmetrics" ] && [ "$kind" = tp ]; then
    sample_sent "$bmetrics" "$dir/sent.txt" &
    spid=$!
  fi
  local ppid=""
  if [ "$profiling" = 1 ]; then
    mkdir -p "$out/profiles"
    (sleep "$WARMUP" && curl -s --max-time $((DURATION + 10)) -o "$out/profiles/$broker-$load.cpu.pb.gz" \
      "http://$bmetrics/debug/pprof/profile?seconds=$((DURATION - 1))") &
    ppid=$!
  fi
  run_timed "$RUN_TIMEOUT" /usr/bin/time -f '%U %S %e' -o "$dir/loadgen.time" \
    "${pin_load[@]}" "$mqttv5_bin" "${args[@]}" > "$r_json" 2> "$dir/loadgen.err" || r_status=fail
  stop_sampler
  [ -z "$ppid" ] || wait "$ppid" || echo "bench-throughput: the CPU profile of $broker $load failed" >&2
  r_bsent=$(sent_rate "$dir/sent.txt")
  if kill -0 "$bpid" 2> /dev/null; then
    c1=$(cpu_ticks "$bpid")
    io1=$(io_calls "$bpid")
    r_bcpu=$(awk -v a="$c0" -v b="$c1" -v t="$clk_tck" 'BEGIN {printf "%.2f", (b - a) / t}')
    read -r r_breads r_bwrites <<< "$(awk -v a="$io0" -v b="$io1" 'BEGIN {split(a, x, " "); split(b, y, " "); print y[1] - x[1], y[2] - x[2]}')"
  else
    r_bcpu="" r_breads="" r_bwrites="" r_status=fail
    echo "bench-throughput: $broker exited during the run; its log:" >&2
    tail -20 "$dir/broker.log" >&2
  fi
  stop_broker
  r_lcpu="" r_lwall=""
  if [ -s "$dir/loadgen.time" ]; then
    read -r r_lcpu r_lwall <<< "$(awk 'END {printf "%.2f %.2f", $1 + $2, $3}' "$dir/loadgen.time")"
  fi
  if [ $r_status = fail ] || ! python3 -c 'import json, sys; json.load(open(sys.argv[1]))["results"]' "$r_json" 2> /dev/null; then
    r_status=fail
    failed=$((failed + 1))
    echo "bench-throughput: run $id failed; mqttv5's standard error:" >&2
    grep -v 'Packet reader stopping\|stream accept ended' "$dir/loadgen.err" | tail -10 >&2 || true
  fi
}

# json_fields FILE KEY...: the results' KEYs, comma-separated ("" if absent).
json_fields() {
  python3 - "$@" << 'EOF'
import json, sys
try:
    r = json.load(open(sys.argv[1]))["results"]
except Exception:
    r = {}
print(",".join("" if r.get(k) is None else str(r[k]) for k in sys.argv[2:]))
EOF
}

# order ROUND NAME...: NAMEs, reversed in even rounds.
order() {
  local round=$1
  shift
  if [ $((round % 2)) -eq 0 ]; then
    local i a=("$@")
    for ((i = ${#a[@]} - 1; i >= 0; i--)); do echo "${a[$i]}"; done
  else
    printf '%s\n' "$@"
  fi
}

echo "bench-throughput: $total runs into $out (${#brokers[@]} brokers, $ROUNDS rounds, ${DURATION}s + ${WARMUP}s warm-up each)" >&2

# --- throughput -----------------------------------------------------------
if [ $do_tp = 1 ]; then
  echo "round,broker,load,qos,subscribers,msgs_per_s,broker_cpu_s,loadgen_cpu_s,loadgen_wall_s,published,received,delivered_ratio,broker_sent_per_s,status,broker_read_calls,broker_write_calls" > "$out/runs.csv"
  for ((r = 1; r <= ROUNDS; r++)); do
    for l in "${loads[@]}"; do
      read -r load qos subs <<< "$l"
      for b in $(order "$r" "${brokers[@]}"); do
        bench "$r" tp "$b" "$load" "$qos" "$subs"
        f=$(json_fields "$r_json" throughput_avg published received delivered_ratio)
        IFS=, read -r rate pub recv ratio <<< "$f"
        echo "$r,$b,$load,$qos,$subs,$rate,$r_bcpu,$r_lcpu,$r_lwall,$pub,$recv,$ratio,$r_bsent,$r_status,$r_breads,$r_bwrites" >> "$out/runs.csv"
        progress "round $r $load $b: ${rate:-?} msg/s${r_bsent:+ (broker sent $r_bsent/s)}, broker CPU ${r_bcpu:-?} s, mqttv5 CPU ${r_lcpu:-?} s in ${r_lwall:-?} s ($r_status; load $(cut -d' ' -f1 /proc/loadavg))"
      done
    done
  done
fi

# --- profiles -------------------------------------------------------------
if [ $n_prof -gt 0 ]; then
  profiling=1
  for l in "${loads[@]}"; do
    read -r load qos subs <<< "$l"
    for b in "${brokers[@]}"; do
      case $b in iotq-* | base-*) ;; *) continue ;; esac
      bench prof tp "$b" "$load" "$qos" "$subs"
      p="$out/profiles/$b-$load.cpu.pb.gz"
      if [ -s "$p" ]; then
        bin=$IOTQ
        case $b in base-*) bin=$IOTQ_BASE ;; esac
        { echo "# $b $load: CPU profile of the broker over $((DURATION - 1)) s of the run (mqttv5 counted ${r_json:+$(json_fields "$r_json" throughput_avg)} msg/s)"
          go tool pprof -top -nodecount=35 "$bin" "$p" 2> /dev/null
          echo
          go tool pprof -top -cum -nodecount=35 "$bin" "$p" 2> /dev/null
        } > "$out/profiles/$b-$load.top.txt"
      fi
      progress "profiled $load $b: $(json_fields "$r_json" throughput_avg) msg/s, broker CPU ${r_bcpu:-?} s"
    done
  done
  profiling=0
fi

# --- latency --------------------------------------------------------------
if [ $do_lat = 1 ] && [ ${#lat_brokers[@]} -gt 0 ]; then
  echo "round,broker,load,qos,rate,messages,p50_us,p95_us,p99_us,avg_us,max_us,broker_cpu_s,loadgen_cpu_s,loadgen_wall_s,status" > "$out/latency.csv"
  for ((r = 1; r <= ROUNDS; r++)); do
    for qos in 0 1; do
      for b in $(order "$r" "${lat_brokers[@]}"); do
        bench "$r" lat "$b" "lat-p2p-q$qos" "$qos" 1
        f=$(json_fields "$r_json" messages p50_us p95_us p99_us avg_us max_us)
        echo "$r,$b,lat-p2p-q$qos,$qos,$LAT_RATE,$f,$r_bcpu,$r_lcpu,$r_lwall,$r_status" >> "$out/latency.csv"
        IFS=, read -r _ p50 _ p99 _ _ <<< "$f"
        progress "round $r latency QoS $qos at $LAT_RATE msg/s $b: p50 ${p50:-?} us, p99 ${p99:-?} us ($r_status)"
      done
    done
  done
fi

# --- idle memory -----------------------------------------------------------
if [ $do_idle = 1 ]; then
  echo "round,broker,transport,connections,kib_per_conn,status" > "$out/idle.csv"
  echo "bench-throughput: compiling the idle-memory benchmark (go test -c ./broker)" >&2
  go test -c -o "$tmp/broker.test" ./broker
  # idle_run ROUND NAME BIN SCHEMES
  idle_run() {
    local round=$1 name=$2 bin=$3 schemes=$4 rc=0
    local log="$tmp/idle-$round-$name.txt"
    printf 'idle-%s-%s\tidle\t%s\tcd broker && IOTQ_BIN=%s IOTQ_IDLE_CONNS=%s IOTQ_IDLE_SETTLE=%s IOTQ_IDLE_SCHEMES=%s go test -run %s -bench IdleConnectionMemory -benchtime 1x\n' \
      "$round" "$name" "$name" "$bin" "$IDLE_N" "$IDLE_SETTLE" "$schemes" "'^\$'" >> "$out/commands.txt"
    run_timed "$IDLE_TIMEOUT" env -C "$repo/broker" IOTQ_BIN="$bin" IOTQ_IDLE_CONNS="$IDLE_N" IOTQ_IDLE_SETTLE="$IDLE_SETTLE" IOTQ_IDLE_SCHEMES="$schemes" \
      "$tmp/broker.test" -test.run '^$' -test.bench IdleConnectionMemory -test.benchtime 1x \
      -test.timeout "${IDLE_TIMEOUT}s" > "$log" 2>&1 || rc=$?
    # BenchmarkIdleConnectionMemory/broker=iotq/transport=quic-2  1  2806162703 ns/op  144.8 KB/conn
    local got
    got=$(awk -v r="$round" -v n="$IDLE_N" -v name="$name" '
      /^BenchmarkIdleConnectionMemory\/broker=/ && / KB\/conn/ {
        split($1, p, "/"); b = substr(p[2], 8); t = substr(p[3], 11); sub(/-[0-9]+$/, "", t)
        if (b == "iotq") b = name
        for (i = 2; i < NF; i++) if ($(i + 1) == "KB/conn") v = $i
        print r "," b "," t "," n "," v ",ok"
      }' "$log")
    if [ $rc != 0 ] || [ -z "$got" ]; then
      failed=$((failed + 1))
      echo "bench-throughput: idle run $name failed (status $rc):" >&2
      tail -20 "$log" >&2
      echo "$round,$name,,$IDLE_N,,fail" >> "$out/idle.csv"
    else
      echo "$got" >> "$out/idle.csv"
    fi
    progress "round $round idle $IDLE_N connections: $(echo "$got" | awk -F, '{printf "%s %s %s KiB/conn; ", $2, $3, $5}')"
  }
  for ((r = 1; r <= IDLE_ROUNDS; r++)); do
    runs=("iotq $IOTQ mosquitto,mqtt,quic")
    [ -n "$IOTQ_BASE" ] && runs+=("base $IOTQ_BASE mqtt,quic")
    for i in $(order "$r" "${!runs[@]}"); do
      read -r name bin schemes <<< "${runs[$i]}"
      idle_run "$r" "$name" "$bin" "$schemes"
    done
  done
fi

echo "loadavg after: $(cat /proc/loadavg)" >> "$out/env.txt"
[ "$KEEP_RAW" = 1 ] || rm -rf "$out/raw"

# --- summary ---------------------------------------------------------------
python3 - "$out" << 'EOF'
import csv, json, os, statistics, sys

out = sys.argv[1]
env = {}
for line in open(os.path.join(out, "env.txt")):
    k, _, v = line.rstrip("\n").partition(": ")
    env[k] = v

def rows(name):
    p = os.path.join(out, name)
    return list(csv.DictReader(open(p))) if os.path.exists(p) else []

def cells(rs, key, value):
    """(broker, load) -> sorted values of the ok runs."""
    c = {}
    for r in rs:
        if r.get("status") == "ok" and r.get(value):
            c.setdefault((r["broker"], r[key]), []).append(float(r[value]))
    return c

def med(v):
    return statistics.median(v) if v else None

runs, lat, idle = rows("runs.csv"), rows("latency.csv"), rows("idle.csv")
tp = cells(runs, "load", "msgs_per_s")
bcpu = cells(runs, "load", "broker_cpu_s")
lcpu = cells(runs, "load", "loadgen_cpu_s")
lwall = cells(runs, "load", "loadgen_wall_s")
bsent = cells(runs, "load", "broker_sent_per_s")
# CPU microseconds per message mqttv5 received, per run: the broker's and
# the broker's plus mqttv5's. The CPU covers the whole run (warm-up and
# drain too) and the count the measured seconds and the drain, the same
# bias for every broker: compare within a table only.
per_msg, per_msg_all = {}, {}
for r in runs:
    if r.get("status") == "ok" and r.get("received") and float(r["received"]) > 0 and r.get("broker_cpu_s") and r.get("loadgen_cpu_s"):
        n = float(r["received"])
        per_msg.setdefault((r["broker"], r["load"]), []).append(float(r["broker_cpu_s"]) / n * 1e6)
        per_msg_all.setdefault((r["broker"], r["load"]), []).append((float(r["broker_cpu_s"]) + float(r["loadgen_cpu_s"])) / n * 1e6)
# The broker's read and write system calls per message mqttv5 received, per
# run (runs.csv from before these columns has none): how much each call
# carries. Only for brokers that read and write their TCP sockets with
# read and write (Mosquitto, iotq over mqtt://): the socket calls of the
# others are not counted in /proc/PID/io.
def calls_counted(b):
    return "quic" not in b and not b.startswith("mqtt5")

reads_per_msg, writes_per_msg = {}, {}
for r in runs:
    if not calls_counted(r["broker"]):
        continue
    if r.get("status") == "ok" and r.get("received") and float(r["received"]) > 0 and r.get("broker_read_calls") and r.get("broker_write_calls"):
        n = float(r["received"])
        reads_per_msg.setdefault((r["broker"], r["load"]), []).append(float(r["broker_read_calls"]) / n)
        writes_per_msg.setdefault((r["broker"], r["load"]), []).append(float(r["broker_write_calls"]) / n)
p99 = cells(lat, "load", "p99_us")
p50 = cells(lat, "load", "p50_us")
mem = cells(idle, "transport", "kib_per_conn")
loads = list(dict.fromkeys(r["load"] for r in runs))
brokers = list(dict.fromkeys(r["broker"] for r in runs))
lat_loads = list(dict.fromkeys(r["load"] for r in lat))
lat_brokers = list(dict.fromkeys(r["broker"] for r in lat))

def ratio(c, a, b, load):
    x, y = med(c.get((a, load), [])), med(c.get((b, load), []))
    return x / y if x is not None and y else None

by_round = {(r["round"], r["broker"], r["load"]): float(r["msgs_per_s"])
            for r in runs if r.get("status") == "ok" and r.get("msgs_per_s")}

def round_ratio(a, b, load):
    """Median over rounds of a/b within each round (adjacent in time)."""
    v = [x / by_round[(rd, b, l)] for (rd, br, l), x in by_round.items()
         if br == a and l == load and by_round.get((rd, b, l))]
    return med(v)

def fmt_k(v):
    return "-" if v is None else f"{v / 1000:.0f}k" if v >= 10000 else f"{v / 1000:.1f}k"

def fmt_r(v):
    return "-" if v is None else f"{v:.2f}x"

summary = {"env": env, "throughput": {}, "latency": {}, "idle": {}, "ratios": {}, "targets": []}
for (b, l), v in tp.items():
    summary["throughput"].setdefault(b, {})[l] = {
        "median": med(v), "min": min(v), "max": max(v), "n": len(v),
        "broker_cpu_s": med(bcpu.get((b, l), [])), "loadgen_cpu_s": med(lcpu.get((b, l), [])),
        "loadgen_wall_s": med(lwall.get((b, l), [])),
        "broker_sent_per_s": med(bsent.get((b, l), [])),
        "broker_cpu_us_per_msg": med(per_msg.get((b, l), [])),
        "total_cpu_us_per_msg": med(per_msg_all.get((b, l), [])),
        "broker_read_calls_per_msg": med(reads_per_msg.get((b, l), [])),
        "broker_write_calls_per_msg": med(writes_per_msg.get((b, l), []))}
for (b, l), v in p99.items():
    summary["latency"].setdefault(b, {})[l] = {
        "p99_us_median": med(v), "p99_us_min": min(v), "p99_us_max": max(v),
        "p50_us_median": med(p50.get((b, l), [])), "n": len(v)}
for (b, t), v in mem.items():
    summary["idle"].setdefault(b, {})[t] = {"kib_per_conn_median": med(v), "min": min(v), "max": max(v), "n": len(v)}

pairs = [("iotq-mqtt-none", "mosquitto"), ("iotq-mqtt-bolt", "mosquitto"),
         ("iotq-quic-none", "iotq-mqtt-none"), ("iotq-quic-none", "mqtt5-quic"),
         ("mqtt5-quic", "mqtt5-tcp"), ("mqtt5-tcp", "mosquitto"),
         ("iotq-mqtt-bolt", "iotq-mqtt-none"), ("iotq-mqtt-none", "base-mqtt-none"),
         ("iotq-mqtt-bolt", "base-mqtt-bolt"), ("iotq-quic-none", "base-quic-none")]
pairs = [p for p in pairs if p[0] in brokers and p[1] in brokers]
for a, b in pairs:
    summary["ratios"][f"{a}/{b}"] = {l: {"of_medians": ratio(tp, a, b, l), "median_per_round": round_ratio(a, b, l)}
                                      for l in loads}

def target(what, value, goal, higher=True):
    ok = None if value is None else (value >= goal if higher else value <= goal)
    summary["targets"].append({"target": what, "value": value, "goal": goal, "met": ok})

fan = [l for l in loads if l.startswith("fan")]
for l in loads:
    goal = 2.0 if l in fan and l.endswith("q0") else 1.2
    target(f"iotq-mqtt-none/mosquitto {l} >= {goal}x", ratio(tp, "iotq-mqtt-none", "mosquitto", l), goal)
for l in loads:
    target(f"iotq-mqtt-bolt/mosquitto {l} >= 0.8x", ratio(tp, "iotq-mqtt-bolt", "mosquitto", l), 0.8)
for l in loads:
    target(f"iotq-quic-none/iotq-mqtt-none {l} >= 0.9x", ratio(tp, "iotq-quic-none", "iotq-mqtt-none", l), 0.9)
for l in loads:
    target(f"iotq-quic-none/mqtt5-quic {l} >= 1x", ratio(tp, "iotq-quic-none", "mqtt5-quic", l), 1.0)
for l in lat_loads:
    for b in ("iotq-mqtt-none", "iotq-mqtt-bolt"):
        target(f"p99 {b}/mosquitto {l} <= 1x", ratio(p99, b, "mosquitto", l), 1.0, higher=False)
target("idle iotq mqtt <= 4 KiB/conn", med(mem.get(("iotq", "mqtt"), [])), 4, higher=False)
target("idle iotq quic <= 32 KiB/conn", med(mem.get(("iotq", "quic"), [])), 32, higher=False)

json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1, sort_keys=True)

md = []
w = md.append
w("# Broker throughput, latency and idle memory (scripts/bench-throughput.sh)\n")
if env.get("tiny") == "1":
    w("**Tiny validation run (--tiny): 1 s runs, the figures mean nothing.**\n")
w("Written by scripts/bench-throughput.sh from runs.csv, latency.csv and idle.csv in this directory; "
  "medians over rounds, min-max in brackets.\n")
w("## Host and versions\n")
for k in ("command", "date", "repo commit", "iotq", "iotq base", "mosquitto", "mqttv5", "go", "host",
          "tcp_congestion_control", "fd limit", "loadavg before", "loadavg after"):
    if k in env:
        w(f"- {k}: `{env[k]}`")
w("")
if runs:
    w("## Throughput: delivered messages per second (mqttv5 throughput_avg)\n")
    w("| broker | " + " | ".join(loads) + " |")
    w("|---|" + "---|" * len(loads))
    for b in brokers:
        cs = []
        for l in loads:
            v = tp.get((b, l), [])
            cs.append(f"{fmt_k(med(v))} ({fmt_k(min(v))}-{fmt_k(max(v))})" if v else "-")
        w(f"| {b} | " + " | ".join(cs) + " |")
    w("")
    w("### Ratios\n")
    w("Ratio of the medians (in brackets: the median over rounds of the ratio within each round).\n")
    w("| ratio | " + " | ".join(loads) + " |")
    w("|---|" + "---|" * len(loads))
    for a, b in pairs:
        w(f"| {a} / {b} | " + " | ".join(f"{fmt_r(ratio(tp, a, b, l))} ({fmt_r(round_ratio(a, b, l))})" for l in loads) + " |")
    w("")
    w("### CPU seconds per run: broker / mqttv5 (mqttv5 wall seconds)\n")
    w("mqttv5 near 2 CPU seconds per wall second (nproc 2), or near 1 on its own core (PIN=1 in the command), means the load generator, not the broker, was the limit.\n")
    w("| broker | " + " | ".join(loads) + " |")
    w("|---|" + "---|" * len(loads))
    for b in brokers:
        cs = []
        for l in loads:
            x, y, z = (med(c.get((b, l), [])) for c in (bcpu, lcpu, lwall))
            cs.append("-" if x is None or y is None else f"{x:.1f} / {y:.1f} ({z:.1f} s)")
        w(f"| {b} | " + " | ".join(cs) + " |")
    w("")
    w("### CPU per delivered message, microseconds: broker (broker + mqttv5)\n")
    w("Each run's CPU seconds over the messages mqttv5 received (the measured seconds and the drain; "
      "the warm-up's CPU is in, its messages are not, for every broker alike), the median over rounds. "
      "On a host the broker shares with the load generator, what one spends the other cannot.\n")
    w("| broker | " + " | ".join(loads) + " |")
    w("|---|" + "---|" * len(loads))
    for b in brokers:
        w(f"| {b} | " + " | ".join(
            "-" if not per_msg.get((b, l)) else f"{med(per_msg[(b, l)]):.2f} ({med(per_msg_all[(b, l)]):.2f})"
            for l in loads) + " |")
    w("")
    if reads_per_msg:
        w("### The broker's system calls per delivered message: reads / writes\n")
        w("Read and write system calls of the broker process during the run (/proc/PID/io syscr and syscw: "
          "reads that find nothing count too) over the messages mqttv5 received, the median over rounds. "
          "Fewer calls per message means more messages per call: what the broker batches, and what each of "
          "the load generator's reads finds. Only Mosquitto and iotq over mqtt://: the socket calls of the "
          "others (the mqtt5 broker's recv and send, QUIC's recvmmsg and sendmsg) are not counted there.\n")
        w("| broker | " + " | ".join(loads) + " |")
        w("|---|" + "---|" * len(loads))
        for b in [b for b in brokers if calls_counted(b)]:
            w(f"| {b} | " + " | ".join(
                "-" if not reads_per_msg.get((b, l)) else f"{med(reads_per_msg[(b, l)]):.2f} / {med(writes_per_msg[(b, l)]):.2f}"
                for l in loads) + " |")
        w("")
    sent_brokers = [b for b in brokers if any(bsent.get((b, l)) for l in loads)]
    if sent_brokers:
        w("### The broker's own count: PUBLISH packets written to subscribers per second\n")
        w("iotq_broker_messages_sent_total read every 0.5 s, the median over the run's busy seconds "
          "(warm-up included), against mqttv5's count in brackets. A broker figure well above mqttv5's "
          "means the load generator counted late or not at all: the broker was not the limit.\n")
        w("| broker | " + " | ".join(loads) + " |")
        w("|---|" + "---|" * len(loads))
        for b in sent_brokers:
            w(f"| {b} | " + " | ".join(f"{fmt_k(med(bsent.get((b, l), [])))} ({fmt_k(med(tp.get((b, l), [])))})"
                                       if bsent.get((b, l)) else "-" for l in loads) + " |")
        w("")
if lat:
    rate = lat[0]["rate"]
    w(f"## Latency at a paced {rate} msg/s, 1 -> 1 (mqttv5 --mode latency), microseconds\n")
    w("| broker | " + " | ".join(f"{l} p50 | {l} p99" for l in lat_loads) + " |")
    w("|---|" + "---|---|" * len(lat_loads))
    for b in lat_brokers:
        cs = []
        for l in lat_loads:
            a, v = p50.get((b, l), []), p99.get((b, l), [])
            cs.append(f"{med(a):.0f}" if a else "-")
            cs.append(f"{med(v):.0f} ({min(v):.0f}-{max(v):.0f})" if v else "-")
        w(f"| {b} | " + " | ".join(cs) + " |")
    w("")
if idle:
    n = idle[0]["connections"]
    w(f"## Idle memory: broker RSS growth per connection at {n} idle connections, KiB\n")
    w("iotq runs with --store none here; base = IOTQ_BASE.\n")
    w("| broker | transport | KiB per connection |")
    w("|---|---|---|")
    for (b, t), v in sorted(mem.items()):
        w(f"| {b} | {t} | {med(v):.2f} ({min(v):.2f}-{max(v):.2f}) |")
    w("")
prof_dir = os.path.join(out, "profiles")
tops = sorted(f for f in os.listdir(prof_dir) if f.endswith(".top.txt")) if os.path.isdir(prof_dir) else []
if tops:
    w("## Where the broker's CPU went (PROFILE=1)\n")
    w("One more run per iotq broker and load, started with --pprof, not counted above: the CPU profile "
      "of the broker's busy seconds (profiles/*.cpu.pb.gz; the full listings by flat and cumulative time "
      "in profiles/*.top.txt). The functions that used the most CPU themselves (flat):\n")
    for f in tops:
        lines = open(os.path.join(prof_dir, f)).read().splitlines()
        head = lines[0].lstrip("# ") if lines else f
        body, started = [], False
        for line in lines[1:]:
            if line.strip().startswith("flat"):
                started = True
                continue
            if started:
                if not line.strip():
                    break
                body.append(line)
        total = next((l for l in lines if l.startswith("Showing nodes")), "")
        w(f"**{head}** ({total.strip()})\n")
        w("```")
        w("\n".join(body[:10]))
        w("```\n")
w("## Issue 21's targets (from the medians above)\n")
w("| target | value | met |")
w("|---|---|---|")
for t in summary["targets"]:
    v = "-" if t["value"] is None else f"{t['value']:.2f}"
    m = "no data" if t["met"] is None else ("yes" if t["met"] else "**no**")
    w(f"| {t['target']} | {v} | {m} |")
w("")
w("## Commands\n")
w("Every command of every run, in order, is in commands.txt (ports and temporary directories vary). "
  "The first of each kind:\n")
seen, cmds = set(), []
for line in open(os.path.join(out, "commands.txt")):
    rid, kind, key, cmd = line.rstrip("\n").split("\t", 3)
    if (kind, key) not in seen:
        seen.add((kind, key))
        cmds.append(f"# {kind} {key}\n{cmd}")
w("```")
w("\n".join(cmds))
w("```")
w("")
fails = [r for r in runs + lat + idle if r.get("status") != "ok"]
if fails:
    w(f"**{len(fails)} runs failed** (status fail in the CSV files); their figures are left out.\n")
open(os.path.join(out, "summary.md"), "w").write("\n".join(md))
EOF

echo "bench-throughput: results in $out (summary.md); $failed failed runs" >&2
[ "$failed" = 0 ]
