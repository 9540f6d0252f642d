# shellcheck shell=bash
# Variables flow both ways with scripts/lab (LAB_* out; variant, interval, SRV_NS... in).
# shellcheck disable=SC2034,SC2154
# Lab busy-host: one server namespace with what a real server has, and one
# client namespace loading it, all at once: several listeners, several flows,
# a multi-threaded event-loop server and two client endpoints. In each variant
# exactly one object is faulty and everything else runs healthy beside it, so
# a verdict must name that object (listener address:port, flow, endpoint,
# thread) and no other. Sourced by scripts/lab, which owns the namespaces, the
# capture (all four probes) and the cleanup; this file says what runs.
#
# Objects (server 198.18.0.1, client 198.18.0.2, or with IP_VERSION=6 2001:2::1
# and 2001:2::2, joined through a bridge in a namespace with no name, the path
# between them; every variant runs them all)
#   listeners  small  aqserver :8081, accept delay 2 ms, bursts of 100 every 1 s
#              heavy  aqserver :8080, backlog 4096, 300 conn/s (healthy under load)
#              idle   aqserver :8082, backlog 128, no client
#   flows      clean  iperf3 198.18.0.2:5311 -> :5201 at 200 Mbit/s
#              lossy  iperf3 198.18.0.2:5312 -> :5202 at 10 Mbit/s (iperf3 --cport
#                     fixes the data stream's client port, so an nftables rule on
#                     the path's bridge can drop that flow's packets only)
#   bulk       bufflow 198.18.0.2:5401 -> :7001 and :5402 -> :7002, each written at 1 MB/s
#              [BULK_RATE] by a non-blocking writer, each read by its own bufflow server
#   loops      loopserver :9000-9003: four threads loop0..loop3, each its own epoll
#              loop and port; wrk -c8 paced (20 ms think time) on loop N [HOT_LOOP,
#              default 0], wrk -c2 paced on the next one, the other two idle
#   endpoints  the client's ip_local_port_range is 500 ports; aqserver -wait-close
#              on :8083 and :8084 lets the client close first (TIME_WAIT on the
#              client): exhaust 10 conn/s to :8083, light 5 conn/s to :8084
#
# Variants: one fault each (the only parameter that differs from healthy)
#   listener  the small listener's backlog is 16 (healthy: 256): bursts overflow it
#   flow      5 % of the lossy flow's client->server packets dropped (healthy: 0 %)
#             (the client's veth sends at most 8 segments per packet in this variant,
#             so 5 % of packets is about 5 % of the flow's segments)
#   loop      loop N spins 10 ms per request (healthy: 200 us): 8 clients with
#             20 ms think time ask for more than one CPU, loop N never blocks
#   ports     150 conn/s to :8083 (healthy: 10): 500 ports / 60 s = 8.3 conn/s
#             sustainable, EADDRNOTAVAIL after ~3.3 s; :8084 keeps working
#   buffer    the reader of the bulk flow to :7001 takes 4 KB every 100 ms (healthy: as fast
#             as it comes): its window closes and its writer is held back (rwnd_limited);
#             :7002 beside it keeps up
#   healthy   nothing wrong
#
# The clients' own logs go to <run>/lab/ (connects-<name>.csv, iperf3-<name>.json,
# wrk-<name>.txt), with the kernel's per-object numbers the lab samples itself:
# ss -ti of the two flows every 0.2 s (ss-flows.txt) and the loop threads'
# /proc/<pid>/task/<tid>/stat every 0.5 s (task-stat.csv). There is no
# connects.csv: one client log per run would mix five clients, and the verdicts
# must come from the probes and kernel counters alone, as on a production host.
# lab.json ("lab" in metadata.json) lists every object with the numbers from
# those files (per flow: iperf3's and ss's retransmits of the same socket; per
# endpoint: the client's EADDRNOTAVAIL count; per loop thread: CPU share).

LAB_VARIANTS=(listener flow loop ports buffer healthy)
# Over IPv4 or IPv6 (IP_VERSION, scripts/lab): training incidents draw either.
LAB_IP_VERSIONS=(4 6)
# No LAB_PROBES: the lab is about telling objects of every family apart, so scripts/lab
# runs every family of probes/families.conf.
LAB_BINARIES=(aqserver connload loopserver bufflow)
# Ports may be set from the environment (training/incidents.py draws them, so that the faulty
# object is not always the same port); the defaults are the ones this header names.
HEAVY_PORT=${HEAVY_PORT:-8080} SMALL_PORT=${SMALL_PORT:-8081} IDLE_PORT=${IDLE_PORT:-8082}
EXHAUST_PORT=${EXHAUST_PORT:-8083} LIGHT_PORT=${LIGHT_PORT:-8084}
CLEAN_PORT=${CLEAN_PORT:-5201} LOSSY_PORT=${LOSSY_PORT:-5202} CLEAN_CPORT=${CLEAN_CPORT:-5311}
LOSSY_CPORT=${LOSSY_CPORT:-5312}
BULK_SLOW_PORT=${BULK_SLOW_PORT:-7001} BULK_FAST_PORT=${BULK_FAST_PORT:-7002}
BULK_SLOW_CPORT=${BULK_SLOW_CPORT:-5401} BULK_FAST_CPORT=${BULK_FAST_CPORT:-5402}
LOOP_PORT=9000 LOOPS=4 LOOP_THINK_MS=20
# The busy loop (wrk -c8; the hot one under `loop`) and the lightly loaded one after it.
HOT_LOOP=${HOT_LOOP:-0}
if ! [[ $HOT_LOOP =~ ^[0-9]+$ ]] || ((HOT_LOOP >= LOOPS)); then
	die "HOT_LOOP must be 0 to $((LOOPS - 1)), got '$HOT_LOOP'"
fi
LIGHT_LOOP=$(((HOT_LOOP + 1) % LOOPS))

lab_describe() {
	cat <<TEXT
busy-host variants (environment overrides in brackets); every variant runs every object:
  listener  small listener backlog 16 [BACKLOG] for bursts of 100 [BURST] every 1s
  flow      5 % [LOSS_PCT] of the lossy flow's packets dropped (iperf3 at 10 Mbit/s)
  loop      loop$HOT_LOOP [HOT_LOOP] spins 10ms [HOT_WORK] per request under wrk -c8 with 20 ms think time
  ports     150 conn/s [EXHAUST_RATE] to :$EXHAUST_PORT from 500 client ports [PORT_RANGE]
  buffer    the reader of the bulk flow to :$BULK_SLOW_PORT takes 4096 bytes every 100ms [READ_EVERY_SLOW]
  healthy   backlog 256, no loss, 200us per request, 10 conn/s: nothing wrong
  all:      ${LOAD_SECONDS:-8}s of load [LOAD_SECONDS]; heavy listener 300 conn/s [HEAVY_RATE];
            clean flow 200 Mbit/s [CLEAN_RATE]; light endpoint 5 conn/s [LIGHT_RATE];
            bulk flows 1000000 bytes/s each [BULK_RATE]
TEXT
}

lab_params() {
	local want_backlog=${BACKLOG:-} want_loss=${LOSS_PCT:-} want_work=${HOT_WORK:-} want_rate=${EXHAUST_RATE:-}
	local want_every=${READ_EVERY_SLOW:-}
	BACKLOG=${want_backlog:-256} LOSS_PCT=${want_loss:-0} HOT_WORK=${want_work:-200us} EXHAUST_RATE=${want_rate:-10}
	READ_EVERY_SLOW=0s
	case $1 in
	listener) BACKLOG=${want_backlog:-16} ;;
	flow) LOSS_PCT=${want_loss:-5} ;;
	loop) HOT_WORK=${want_work:-10ms} ;;
	ports) EXHAUST_RATE=${want_rate:-150} ;;
	buffer) READ_EVERY_SLOW=${want_every:-100ms} ;;
	esac
	FAULT=$1
	[[ $1 != healthy ]] || FAULT=""
	LOAD_SECONDS=${LOAD_SECONDS:-8} BURST=${BURST:-100} HEAVY_RATE=${HEAVY_RATE:-300} LIGHT_RATE=${LIGHT_RATE:-5}
	CLEAN_RATE=${CLEAN_RATE:-200M} LOSSY_RATE=${LOSSY_RATE:-10M} LOOP_WORK=200us BULK_RATE=${BULK_RATE:-1000000}
	PORT_RANGE=${PORT_RANGE:-40000 40499}
	LAB_SUMMARY="${FAULT:-nothing} wrong: small listener backlog $BACKLOG, lossy flow ${LOSS_PCT}% loss, loop$HOT_LOOP ${HOT_WORK}/request, $EXHAUST_RATE conn/s to :$EXHAUST_PORT from ports ${PORT_RANGE/ /-}, the reader of :$BULK_SLOW_PORT one read per ${READ_EVERY_SLOW/#0s/nothing}; ${LOAD_SECONDS}s of load"
	LAB_MAX_SECONDS=$((LOAD_SECONDS + 120))
	# The lossy flow's drops happen on the path between the hosts, as on a real
	# network, where a trainee on the server (scripts/train) cannot list them.
	LAB_PATH=1
}

# The client's port range is the scenario (all of its ports toward one
# server), so it is always set; tcp_tw_reuse=0 only without a PROFILE.
lab_setup_netns() {
	local tool
	for tool in nft iperf3 wrk; do
		command -v "$tool" >/dev/null || die "$tool is not installed (run: make setup)"
	done
	ip netns exec "$CLI_NS" sysctl -qw "net.ipv4.ip_local_port_range=$PORT_RANGE" ||
		die "cannot set the client namespace's port range"
	if [[ -z ${PROFILE:-} ]]; then
		ip netns exec "$CLI_NS" sysctl -qw net.ipv4.tcp_tw_reuse=0 || die "cannot set tcp_tw_reuse"
	fi
	((LOSS_PCT > 0)) || return 0
	# One segment per packet from the client: the drop rule below counts packets, and a
	# TSO/GSO packet of up to 45 segments crosses the veth whole, so "5 % of packets" was
	# anywhere from about 1 % to 9 % of the flow's segments (a CI run: 92 of 6918, 1.3 %).
	local dev
	dev=$(ip -n "$CLI_NS" -o link show type veth | awk -F': ' 'NR == 1 {print $2}' | cut -d@ -f1)
	[[ -n $dev ]] || die "no veth in $CLI_NS"
	ip -n "$CLI_NS" link set "$dev" gso_max_segs 8 || die "cannot set gso_max_segs on $dev in $CLI_NS"
	# On the path's bridge (LAB_PATH): loss on the wire, seen by neither host.
	local nft_ip=ip
	[[ $CLI_IP != *:* ]] || nft_ip=ip6
	in_netns "pid:$PATH_NS_PID" nft -f - <<NFT || die "could not install the nftables drop rule"
table bridge tqloss {
	chain drops {
		type filter hook forward priority 0; policy accept;
		$nft_ip saddr $CLI_IP tcp sport $LOSSY_CPORT tcp dport $LOSSY_PORT numgen random mod 100 < $LOSS_PCT drop
	}
}
NFT
}

declare -A SERVER_PIDS=()
LOOP_PID="" LOOP_TIDS=() LOAD_START="" LOAD_END=""

# Wait for FILE to appear while PID lives; NAME for the error.
wait_ready() {
	local file=$1 pid=$2 name=$3 i
	for i in $(seq 200); do
		[[ -e $file ]] && return 0
		kill -0 "$pid" 2>/dev/null || break
		nap 0.05
	done
	cat "$work/$name.err" >&2 2>/dev/null || true
	die "$name did not become ready"
}

# start_aq NAME PORT BACKLOG [aqserver flags...]
# What makes one listener differ from the next (its backlog, accept delay, who closes)
# goes through the environment (TQ_SERVER_FLAGS), its files are named by port: `ps` and
# `ss -p` show five alike command lines (training mode: nothing there gives the fault away).
start_aq() {
	local name=$1 port=$2 backlog=$3 pid
	shift 3
	ln -sfn "aq-$port.json" "$work/$name.json"
	TQ_SERVER_FLAGS="-backlog $backlog $*" ip netns exec "$SRV_NS" "$PACK_ROOT/build/bin/aqserver" \
		-listen "$(host_port "$SRV_IP" "$port")" -duration "${LAB_MAX_SECONDS}s" -ready-file "$work/aq-$port.ready" \
		-stats "$work/aq-$port.json" 2>"$work/$name.err" &
	pid=$!
	cleanup_push "stop_process $pid TERM 5"
	SERVER_PIDS[$name]=$pid
	wait_ready "$work/aq-$port.ready" "$pid" "$name"
}

start_iperf3_server() {
	local name=$1 port=$2 pid i
	ip netns exec "$SRV_NS" iperf3 -s -1 -p "$port" -B "$SRV_IP" >"$work/$name.err" 2>&1 &
	pid=$!
	cleanup_push "stop_process $pid TERM 5"
	SERVER_PIDS[$name]=$pid
	for i in $(seq 100); do
		ip netns exec "$SRV_NS" ss -ltnH "sport = :$port" | grep -q LISTEN && return 0
		kill -0 "$pid" 2>/dev/null || break
		nap 0.05
	done
	cat "$work/$name.err" >&2
	die "iperf3 server $name did not start"
}

# start_sink NAME PORT READ_EVERY: a bufflow reader; how often it reads goes through the environment
# (TQ_SERVER_FLAGS) as aqserver's flags do: the two readers' command lines are alike.
start_sink() {
	local name=$1 port=$2 every=$3 pid size=131072
	[[ $every == 0s ]] || size=4096
	TQ_SERVER_FLAGS="-io-size $size -read-every $every" ip netns exec "$SRV_NS" "$PACK_ROOT/build/bin/bufflow" \
		-role sink -listen "$(host_port "$SRV_IP" "$port")" -duration "${LAB_MAX_SECONDS}s" \
		-ready-file "$work/sink-$port.ready" -stats "$work/$name.json" 2>"$work/$name.err" &
	pid=$!
	cleanup_push "stop_process $pid TERM 5"
	SERVER_PIDS[$name]=$pid
	wait_ready "$work/sink-$port.ready" "$pid" "$name"
}

start_loopserver() {
	local pid i works=()
	# Each loop's CPU per request, through the environment as start_aq's flags.
	for ((i = 0; i < LOOPS; i++)); do
		if ((i == HOT_LOOP)); then works+=("$HOT_WORK"); else works+=("$LOOP_WORK"); fi
	done
	TQ_SERVER_FLAGS="-work $(IFS=,; echo "${works[*]}")" ip netns exec "$SRV_NS" "$PACK_ROOT/build/bin/loopserver" \
		-listen "$(host_port "$SRV_IP" "$LOOP_PORT")" -loops "$LOOPS" -duration "${LAB_MAX_SECONDS}s" \
		-ready-file "$work/loops.ready" -stats "$work/loops.json" 2>"$work/loops.err" &
	pid=$!
	cleanup_push "stop_process $pid TERM 5"
	SERVER_PIDS[loops]=$pid
	wait_ready "$work/loops.ready" "$pid" loops
	# ip netns exec execs the command: the pid is loopserver's own.
	LOOP_PID=$pid
	[[ $(cat "/proc/$pid/comm" 2>/dev/null) == loopserver ]] || LOOP_PID=$(pgrep -P "$pid" -x loopserver | head -1)
	[[ -n $LOOP_PID ]] || die "cannot find the loopserver process"
	mapfile -t LOOP_TIDS < <(loop_threads "$LOOP_PID")
	((${#LOOP_TIDS[@]} == LOOPS)) || die "found ${#LOOP_TIDS[@]} loop threads in loopserver (pid $LOOP_PID), not $LOOPS"
}

# ss -ti of the two iperf3 data flows and the two bulk flows (client side) every 0.2 s: the
# kernel's own per-socket retransmit count (retrans:<now>/<total>) and its clocks (busy,
# rwnd_limited, sndbuf_limited) while they live.
# Both samplers end at their next turn once $work/samplers.stop exists.
sample_flows() {
	local out=$1
	while [[ ! -e $work/samplers.stop ]]; do
		echo "=== ${EPOCHREALTIME/,/.}" >>"$out"
		ip netns exec "$CLI_NS" ss -tinH state established \
			"( sport = :$CLEAN_CPORT or sport = :$LOSSY_CPORT or sport = :$BULK_SLOW_CPORT or sport = :$BULK_FAST_CPORT )" \
			>>"$out" 2>/dev/null || true
		sleep 0.2
	done
}

# start_client NAME CMD...: a client in the client namespace, in the background.
CLIENT_PIDS=() CLIENT_NAMES=()
start_client() {
	local name=$1 pid
	shift
	ip netns exec "$CLI_NS" "$@" >"$work/client-$name.out" 2>"$work/client-$name.err" &
	pid=$!
	cleanup_push "stop_process $pid TERM 5"
	CLIENT_PIDS+=("$pid") CLIENT_NAMES+=("$name")
}

# Every server of the lab, up and ready.
start_servers() {
	start_aq heavy "$HEAVY_PORT" 4096
	start_aq small "$SMALL_PORT" "$BACKLOG" -accept-delay 2ms
	start_aq idle "$IDLE_PORT" 128
	start_aq exhaust "$EXHAUST_PORT" 4096 -wait-close
	start_aq light "$LIGHT_PORT" 4096 -wait-close
	start_iperf3_server clean "$CLEAN_PORT"
	start_iperf3_server lossy "$LOSSY_PORT"
	start_sink bulk_slow "$BULK_SLOW_PORT" "$READ_EVERY_SLOW"
	start_sink bulk_fast "$BULK_FAST_PORT" 0s
	start_loopserver
	printf 'function delay()\n\treturn %d\nend\n' "$LOOP_THINK_MS" >"$work/pace.lua"
	log "servers up: aqserver :$HEAVY_PORT :$SMALL_PORT :$IDLE_PORT :$EXHAUST_PORT :$LIGHT_PORT, iperf3 :$CLEAN_PORT :$LOSSY_PORT, bufflow :$BULK_SLOW_PORT :$BULK_FAST_PORT, loopserver pid $LOOP_PID threads ${LOOP_TIDS[*]}"
}

# Every client at once, in the background (start_client); their logs in $run/lab/.
start_clients() {
	local connload=$PACK_ROOT/build/bin/connload secs=${LOAD_SECONDS}s
	# The listeners' clients read to EOF: the server closes first and keeps the
	# TIME_WAIT (else a quarter of 2400 closes race and land on the client, and
	# :$HEAVY_PORT would run out of the client's 500 ports too).
	start_client heavy "$connload" -target "$(host_port "$SRV_IP" "$HEAVY_PORT")" -mode rate -rate "$HEAVY_RATE" -duration "$secs" \
		-connect-timeout 4s -io-timeout 5s -wait-eof -out "$run/lab/connects-heavy.csv"
	start_client small "$connload" -target "$(host_port "$SRV_IP" "$SMALL_PORT")" -mode burst -burst "$BURST" -burst-every 1s \
		-duration "$secs" -connect-timeout 4s -io-timeout 5s -wait-eof -out "$run/lab/connects-small.csv"
	start_client exhaust "$connload" -target "$(host_port "$SRV_IP" "$EXHAUST_PORT")" -mode rate -rate "$EXHAUST_RATE" -duration "$secs" \
		-connect-timeout 2s -out "$run/lab/connects-exhaust.csv"
	start_client light "$connload" -target "$(host_port "$SRV_IP" "$LIGHT_PORT")" -mode rate -rate "$LIGHT_RATE" -duration "$secs" \
		-connect-timeout 2s -out "$run/lab/connects-light.csv"
	start_client clean iperf3 -c "$SRV_IP" -p "$CLEAN_PORT" --cport "$CLEAN_CPORT" -t "$LOAD_SECONDS" -b "$CLEAN_RATE" -J
	start_client lossy iperf3 -c "$SRV_IP" -p "$LOSSY_PORT" --cport "$LOSSY_CPORT" -t "$LOAD_SECONDS" -b "$LOSSY_RATE" -J
	start_client bulk_slow "$PACK_ROOT/build/bin/bufflow" -role source -target "$(host_port "$SRV_IP" "$BULK_SLOW_PORT")" \
		-cport "$BULK_SLOW_CPORT" -rate "$BULK_RATE" -duration "$secs" -stats "$run/lab/bufflow-bulk_slow.json"
	start_client bulk_fast "$PACK_ROOT/build/bin/bufflow" -role source -target "$(host_port "$SRV_IP" "$BULK_FAST_PORT")" \
		-cport "$BULK_FAST_CPORT" -rate "$BULK_RATE" -duration "$secs" -stats "$run/lab/bufflow-bulk_fast.json"
	start_client loop-busy wrk -t1 -c8 -d"$secs" -s "$work/pace.lua" "http://$(host_port "$SRV_IP" $((LOOP_PORT + HOT_LOOP)))/"
	start_client loop-light wrk -t1 -c2 -d"$secs" -s "$work/pace.lua" "http://$(host_port "$SRV_IP" $((LOOP_PORT + LIGHT_LOOP)))/"
}

lab_run() {
	local run=$1 work=$2 i name failed=() tasks_pid flows_pid
	mkdir -p "$run/lab"
	start_servers
	# One probe interval with every server idle, as a baseline.
	nap 1

	sample_thread_stat "$run/lab/task-stat.csv" "$work/samplers.stop" "$LOOP_PID" "${LOOP_TIDS[@]}" &
	tasks_pid=$!
	cleanup_push "kill_tree $tasks_pid KILL"
	sample_flows "$run/lab/ss-flows.txt" &
	flows_pid=$!
	cleanup_push "kill_tree $flows_pid KILL"

	LOAD_START=${EPOCHREALTIME/,/.}
	start_clients
	for i in "${!CLIENT_PIDS[@]}"; do
		wait "${CLIENT_PIDS[i]}" || failed+=("${CLIENT_NAMES[i]}")
	done
	LOAD_END=${EPOCHREALTIME/,/.}
	touch "$work/samplers.stop"
	wait "$tasks_pid" "$flows_pid" || true
	for name in "${CLIENT_NAMES[@]}"; do
		case $name in
		clean | lossy) cp "$work/client-$name.out" "$run/lab/iperf3-$name.json" ;;
		loop*) cp "$work/client-$name.out" "$run/lab/wrk-$name.txt" ;;
		bulk*) ;; # bufflow wrote its counts into $run/lab/bufflow-$name.json
		*) log "  $name: $(tail -1 "$work/client-$name.err")" ;;
		esac
	done
	if ((${#failed[@]})); then
		for name in "${failed[@]}"; do
			tail -n 5 "$work/client-$name.err" "$work/client-$name.out" >&2 || true
		done
		die "client(s) failed: ${failed[*]}"
	fi
	# One more interval so the probes print the tail of the load; then the
	# servers stop and write their own counts.
	nap "$((interval + 1))"
	for name in "${!SERVER_PIDS[@]}"; do
		stop_process "${SERVER_PIDS[$name]}" TERM 5
	done
}

# lab.json: every object with its parameters and the numbers the lab's own files
# give (labs/busy-host/lab_json.py; null for those not written yet).
lab_json() {
	local name pids=()
	# Every server process the lab started (iperf3 and aqserver by name, loops).
	for name in "${!SERVER_PIDS[@]}"; do pids+=("pid:$name=${SERVER_PIDS[$name]}"); done
	py_helper "$PACK_ROOT/labs/busy-host/lab_json.py" "$work" "$run/lab" \
		variant="$variant" summary="$LAB_SUMMARY" fault="$FAULT" \
		srv_ns="$SRV_NS" srv_inode="$(netns_inode "$SRV_NS")" srv_ip="$SRV_IP" \
		cli_ns="$CLI_NS" cli_inode="$(netns_inode "$CLI_NS")" cli_ip="$CLI_IP" port_range="$PORT_RANGE" \
		tcp_tw_reuse="$(ip netns exec "$CLI_NS" cat /proc/sys/net/ipv4/tcp_tw_reuse)" \
		load_seconds="$LOAD_SECONDS" load_start="$LOAD_START" load_end="$LOAD_END" \
		heavy_port="$HEAVY_PORT" small_port="$SMALL_PORT" idle_port="$IDLE_PORT" exhaust_port="$EXHAUST_PORT" \
		light_port="$LIGHT_PORT" clean_port="$CLEAN_PORT" lossy_port="$LOSSY_PORT" \
		clean_cport="$CLEAN_CPORT" lossy_cport="$LOSSY_CPORT" \
		backlog="$BACKLOG" burst="$BURST" heavy_rate="$HEAVY_RATE" exhaust_rate="$EXHAUST_RATE" \
		light_rate="$LIGHT_RATE" clean_rate="$CLEAN_RATE" lossy_rate="$LOSSY_RATE" loss_pct="$LOSS_PCT" \
		bulk_slow_port="$BULK_SLOW_PORT" bulk_fast_port="$BULK_FAST_PORT" bulk_slow_cport="$BULK_SLOW_CPORT" \
		bulk_fast_cport="$BULK_FAST_CPORT" bulk_rate="$BULK_RATE" read_every_slow="$READ_EVERY_SLOW" \
		loop_pid="$LOOP_PID" loop_port="$LOOP_PORT" loops="$LOOPS" loop_think_ms="$LOOP_THINK_MS" \
		loop_work="$LOOP_WORK" hot_work="$HOT_WORK" hot_loop="$HOT_LOOP" clk_tck="$(getconf CLK_TCK)" "${pids[@]}"
}
