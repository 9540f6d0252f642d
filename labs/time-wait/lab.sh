# shellcheck shell=bash
# Variables flow both ways with scripts/lab (LAB_* out; variant, interval, SRV_NS... in).
# shellcheck disable=SC2034,SC2154
# Lab time-wait: a client namespace opens short connections to a server that
# lets the client close first (aqserver -wait-close), so every connection
# leaves a TIME_WAIT socket on the CLIENT, holding one of its ephemeral ports
# toward that server for 60 s. The client namespace gets a narrow
# ip_local_port_range so exhaustion comes in seconds. Sysctls are set inside
# the lab's namespaces only; they go with them.
#
# Variants
#   exhaust     200 ports, tcp_tw_reuse=0, 100 conn/s: EADDRNOTAVAIL after ~2 s
#   reuse       the same with tcp_tw_reuse=1: ports come back after 1 s
#   keepalive   the same load as requests over few long connections
#   fin-timeout tcp_fin_timeout=5, 150 connections, then 12 s of watching:
#               TIME_WAIT timers still count down from 60 s
#   steady      wide port range, 50 conn/s for 66 s: TIME_WAIT levels at
#               rate x 60 s (Little's law)

LAB_VARIANTS=(exhaust reuse keepalive fin-timeout steady)
# Probes this lab loads (collector/capture records all four by default). Fewer
# probes, fewer recursion misses: the kernel skips a tracepoint program while
# another BPF program runs on the same CPU, and the epoll probe runs on every
# epoll call. CAPTURE_PROBES overrides.
LAB_PROBES=time_wait,retransmits,accept_queue
# Its TIME_WAIT levels are the measurement: every sample lists them (the
# capture's default lists a namespace above 2048 less often; here at most the
# steady variant's ~3000, rate x 60 s), and no CPU budget skips a listing (the
# default 3 % of a CPU rations a walk of more than 1024 sockets on a busy host).
LAB_TW_PER_SAMPLE=65536
LAB_CPU_BUDGET=0
LAB_BINARIES=(aqserver connload)
LAB_PORT=8080

lab_describe() {
	cat <<TEXT
time-wait variants (environment overrides in brackets):
  exhaust      ports 40000-40199 [PORT_RANGE], tw_reuse 0, 100 conn/s [RATE] for 6s [LOAD_SECONDS]
  reuse        the same with tcp_tw_reuse=1
  keepalive    2 conn/s, 50 requests each 20 ms apart (100 req/s), ports 40000-40199
  fin-timeout  tcp_fin_timeout=5, default ports, 50 conn/s for 3s, then 12s [HOLD_SECONDS] of sampling
  steady       default ports, 50 conn/s for 66s: TIME_WAIT plateaus at 50 x 60 = 3000
TEXT
}

lab_params() {
	local want_hold=${HOLD_SECONDS:-}
	TW_REUSE=0 FIN_TIMEOUT="" HOLD_SECONDS=${want_hold:-0} REQS=1 REQ_INTERVAL=0s
	PORT_RANGE=${PORT_RANGE:-40000 40199}
	case $1 in
	exhaust) RATE=${RATE:-100} LOAD_SECONDS=${LOAD_SECONDS:-6} ;;
	reuse) RATE=${RATE:-100} LOAD_SECONDS=${LOAD_SECONDS:-6} TW_REUSE=1 ;;
	keepalive) RATE=${RATE:-2} LOAD_SECONDS=${LOAD_SECONDS:-6} REQS=50 REQ_INTERVAL=20ms ;;
	fin-timeout)
		RATE=${RATE:-50} LOAD_SECONDS=${LOAD_SECONDS:-3} FIN_TIMEOUT=5 HOLD_SECONDS=${want_hold:-12}
		PORT_RANGE="32768 60999"
		;;
	steady) RATE=${RATE:-50} LOAD_SECONDS=${LOAD_SECONDS:-66} PORT_RANGE="32768 60999" ;;
	esac
	local tuning="tcp_tw_reuse=$TW_REUSE${FIN_TIMEOUT:+, tcp_fin_timeout=$FIN_TIMEOUT}"
	# Under a profile the variant's tuning is not applied (see lab_setup_netns).
	[[ -z ${PROFILE:-} ]] || tuning="tcp_tw_reuse and tcp_fin_timeout from profile $PROFILE"
	LAB_SUMMARY="client ports ${PORT_RANGE/ /-}, $tuning, $RATE conn/s for ${LOAD_SECONDS}s, $REQS request(s) per connection"
	LAB_MAX_SECONDS=$((LOAD_SECONDS + HOLD_SECONDS + 120))
}

# The port range is the scenario (a scaled-down stand-in for "all the ports
# this client has toward one server"), so it is always set. tcp_tw_reuse and
# tcp_fin_timeout are tuning: the variant sets them only when no PROFILE is
# given, so that a profile under test (scripts/compare) owns them.
lab_setup_netns() {
	ip netns exec "$CLI_NS" sysctl -qw "net.ipv4.ip_local_port_range=$PORT_RANGE" ||
		die "cannot set the client namespace's port range"
	[[ -z ${PROFILE:-} ]] || return 0
	ip netns exec "$CLI_NS" sysctl -qw "net.ipv4.tcp_tw_reuse=$TW_REUSE" || die "cannot set tcp_tw_reuse"
	if [[ -n $FIN_TIMEOUT ]]; then
		ip netns exec "$CLI_NS" sysctl -qw "net.ipv4.tcp_fin_timeout=$FIN_TIMEOUT"
	fi
}

lab_run() {
	local run=$1 work=$2 pid i
	ip netns exec "$SRV_NS" "$PACK_ROOT/build/bin/aqserver" -listen "$SRV_IP:$LAB_PORT" -backlog 4096 -wait-close \
		-duration "$((LAB_MAX_SECONDS))s" -ready-file "$work/server.ready" -stats "$work/server.json" 2>"$work/server.err" &
	pid=$!
	cleanup_push "stop_process $pid TERM 5"
	for i in $(seq 100); do [[ -e $work/server.ready ]] && break; nap 0.05; done
	[[ -e $work/server.ready ]] || die "aqserver did not become ready"
	nap 1
	ip netns exec "$CLI_NS" "$PACK_ROOT/build/bin/connload" -target "$SRV_IP:$LAB_PORT" -mode rate -rate "$RATE" \
		-duration "${LOAD_SECONDS}s" -connect-timeout 2s -reqs-per-conn "$REQS" -req-interval "$REQ_INTERVAL" \
		-out "$run/connects.csv" 2> >(sed 's/^/  /' >&2) || die "connload failed"
	if ((HOLD_SECONDS > 0)); then
		log "watching TIME_WAIT for ${HOLD_SECONDS}s after the load"
		nap "$HOLD_SECONDS"
	fi
	nap "$((interval + 1))"
	stop_process "$pid" TERM 5
}

lab_json() {
	local stats=null
	[[ -s $work/server.json ]] && stats=$(cat "$work/server.json")
	printf '{"lab": "time-wait", "variant": %s, "summary": %s,\n' "$(json_str "$variant")" "$(json_str "$LAB_SUMMARY")"
	printf ' "server": {"netns": %s, "netns_inode": %s, "addr": %s, "port": %d, "stats": %s},\n' \
		"$(json_str "$SRV_NS")" "$(netns_inode "$SRV_NS")" "$(json_str "$SRV_IP")" "$LAB_PORT" "$stats"
	printf ' "client": {"netns": %s, "netns_inode": %s, "addr": %s, "port_range": %s, "tcp_tw_reuse": %d, "tcp_fin_timeout": %s,\n' \
		"$(json_str "$CLI_NS")" "$(netns_inode "$CLI_NS")" "$(json_str "$CLI_IP")" "$(json_str "$PORT_RANGE")" \
		"$(ip netns exec "$CLI_NS" cat /proc/sys/net/ipv4/tcp_tw_reuse)" "$(ip netns exec "$CLI_NS" cat /proc/sys/net/ipv4/tcp_fin_timeout)"
	printf '   "rate_per_s": %s, "load_seconds": %s, "requests_per_conn": %s, "hold_seconds": %s, "connects_file": "connects.csv"},\n' \
		"$RATE" "$LOAD_SECONDS" "$REQS" "$HOLD_SECONDS"
	printf ' "command": %s}\n' "$(json_str "make lab LAB=time-wait VARIANT=$variant")"
}
