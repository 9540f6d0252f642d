# shellcheck shell=bash
# Variables flow both ways with scripts/lab (LAB_* out; variant, interval, SRV_NS... in).
# shellcheck disable=SC2034,SC2154
# Lab epoll: a Go net/http server (Go's netpoller is epoll) under wrk load,
# and a sweep of idle registered connections at constant active load.
#
# Variants
#   idle   the server with no load: its loop sleeps in epoll_wait (no finding)
#   busy   GOMAXPROCS=1 (one event-loop thread, like nginx or Redis), 1 ms of CPU
#          per request, wrk with 32 connections: the loop never waits
#   nginx  nginx with one worker (a classic single-threaded epoll loop) under
#          wrk -c64: whether its loop saturates on this machine is measured
#   sweep  constant wrk load (8 connections) while connhold keeps 10, 1000,
#          5000, 10000 idle connections registered: does epoll_wait cost follow
#          the registered fds (the seed's "linear scan") or the ready events?
#   hot-thread  loopserver: four epoll loop threads in one process, each its own
#          port; loop1 gets wrk -c8 with 5 ms of CPU per request (up to 8 events
#          a wakeup, each milliseconds of work: it never waits), loop0 a light
#          paced load (it waits), the other two nothing. Only loop1 is at fault.

LAB_VARIANTS=(busy idle sweep nginx hot-thread)
# Probes this lab loads (collector/capture records all four by default). Fewer
# probes, fewer recursion misses: the kernel skips a tracepoint program while
# another BPF program runs on the same CPU, and the epoll probe runs on every
# epoll call. CAPTURE_PROBES overrides.
LAB_PROBES=epoll,accept_queue
LAB_BINARIES=(httpserver connhold loopserver)
LAB_PORT=8080

lab_describe() {
	cat <<TEXT
epoll variants (environment overrides in brackets):
  busy   GOMAXPROCS=1, 1ms work per request [WORK], wrk -c32 [CONNS] for 6s [LOAD_SECONDS]
  idle   no load for 6s
  sweep  wrk -c8 for 3s [LOAD_SECONDS] per phase, idle connections: 10 1000 5000 10000 [IDLE_LIST]
  nginx  nginx, worker_processes 1, wrk -c64 [CONNS] for 6s
  hot-thread  loopserver, 4 loops; loop1 [HOT_LOOP] 5ms of CPU per request [WORK] under
         wrk -c8 [CONNS] for 8s [LOAD_SECONDS]; loop0 wrk -c2 with 20 ms think time
TEXT
}

lab_params() {
	local want_work=${WORK:-} want_conns=${CONNS:-}
	WORK=${want_work:-0s} CONNS=${want_conns:-8} GOMAXPROCS_SRV="" IDLE_LIST=${IDLE_LIST:-}
	case $1 in
	busy) WORK=${want_work:-1ms} CONNS=${want_conns:-32} GOMAXPROCS_SRV=1 LOAD_SECONDS=${LOAD_SECONDS:-6} ;;
	idle) LOAD_SECONDS=${LOAD_SECONDS:-6} ;;
	sweep) LOAD_SECONDS=${LOAD_SECONDS:-3} IDLE_LIST=${IDLE_LIST:-10 1000 5000 10000} ;;
	nginx) CONNS=${want_conns:-64} LOAD_SECONDS=${LOAD_SECONDS:-6} ;;
	hot-thread) WORK=${want_work:-5ms} CONNS=${want_conns:-8} LOAD_SECONDS=${LOAD_SECONDS:-8} HOT_LOOP=${HOT_LOOP:-1} ;;
	esac
	SERVER_COMM=httpserver
	[[ $1 == nginx ]] && SERVER_COMM=nginx
	[[ $1 == hot-thread ]] && SERVER_COMM=loopserver
	LAB_SUMMARY="Go net/http${GOMAXPROCS_SRV:+ (GOMAXPROCS=$GOMAXPROCS_SRV)}, work $WORK/request, "
	[[ $1 == nginx ]] && LAB_SUMMARY="nginx, 1 worker, "
	case $1 in
	idle) LAB_SUMMARY+="no load for ${LOAD_SECONDS}s" ;;
	hot-thread) LAB_SUMMARY="loopserver, 4 loops, loop$HOT_LOOP $WORK/request under wrk -c$CONNS for ${LOAD_SECONDS}s, loop0 paced" ;;
	busy | nginx) LAB_SUMMARY+="wrk -c$CONNS for ${LOAD_SECONDS}s" ;;
	sweep) LAB_SUMMARY+="wrk -c$CONNS for ${LOAD_SECONDS}s per phase with idle connections: $IDLE_LIST" ;;
	esac
	LAB_MAX_SECONDS=400
}

lab_setup_netns() {
	command -v wrk >/dev/null || die "wrk is not installed (run: make setup)"
	[[ $variant != nginx ]] || command -v nginx >/dev/null || die "nginx is not installed (run: make setup)"
}

# nginx in the foreground, one worker, everything it writes kept in the lab's work folder.
start_nginx() {
	local work=$1
	mkdir -p "$work/nginx/logs" "$work/nginx/tmp"
	cat >"$work/nginx/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/logs/error.log;
events { worker_connections 4096; use epoll; }
http {
	access_log off;
	client_body_temp_path $work/nginx/tmp/body;
	proxy_temp_path $work/nginx/tmp/proxy;
	fastcgi_temp_path $work/nginx/tmp/fastcgi;
	uwsgi_temp_path $work/nginx/tmp/uwsgi;
	scgi_temp_path $work/nginx/tmp/scgi;
	server {
		listen $SRV_IP:$LAB_PORT backlog=4096;
		location / { return 200 "hello\n"; }
	}
}
CONF
	ip netns exec "$SRV_NS" nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" 2>"$work/server.err" &
	NGINX_PID=$!
	cleanup_push "stop_process $NGINX_PID TERM 5"
	local i
	for i in $(seq 100); do
		ip netns exec "$SRV_NS" ss -ltnH "sport = :$LAB_PORT" | grep -q LISTEN && return 0
		nap 0.05
	done
	cat "$work/server.err" >&2
	die "nginx did not start"
}

# Phase records for lab.json: "idle_conns start end requests_per_s".
PHASES=()

run_wrk() {
	local out=$1 port=${2:-$LAB_PORT}
	ip netns exec "$CLI_NS" wrk -t1 -c"$CONNS" -d"${LOAD_SECONDS}s" "http://$SRV_IP:$port/" >"$out" 2>&1 ||
		{ cat "$out" >&2; die "wrk failed"; }
	awk '/Requests\/sec/ {print $2}' "$out"
}

# The sweep variant: one wrk phase per count of idle connections held open.
run_sweep_phases() {
	local n i hold_pid t0 rps
	for n in $IDLE_LIST; do
		rm -f "$work/hold.ready"
		ip netns exec "$CLI_NS" "$PACK_ROOT/build/bin/connhold" -target "$SRV_IP:$LAB_PORT" -conns "$n" \
			-hold 300s -rate 5000 -ready-file "$work/hold.ready" 2>"$work/hold.err" &
		hold_pid=$!
		for i in $(seq 300); do [[ -e $work/hold.ready ]] && break; nap 0.1; done
		[[ -e $work/hold.ready ]] || { cat "$work/hold.err" >&2; die "connhold did not get $n connections up"; }
		nap 1	# let the server register them all
		t0=${EPOCHREALTIME/,/.}
		rps=$(run_wrk "$work/wrk-$n.txt")
		PHASES+=("$n $t0 ${EPOCHREALTIME/,/.} $rps")
		log "  $n idle connections: wrk $rps req/s"
		stop_process "$hold_pid" TERM 10
		nap 1
	done
}

# The hot-thread variant: loopserver's loops, one saturated; the loops' CPU time as the kernel
# accounts it beside the capture (lab/task-stat.csv), the ground truth for the report's share.
LOOP_PID="" LOOP_TIDS=()
run_hot_thread() {
	local run=$1 work=$2 pid light i t0 rps works=()
	for ((i = 0; i < 4; i++)); do if ((i == HOT_LOOP)); then works+=("$WORK"); else works+=(0s); fi; done
	ip netns exec "$SRV_NS" "$PACK_ROOT/build/bin/loopserver" -listen "$SRV_IP:$LAB_PORT" -loops 4 \
		-work "$(IFS=,; echo "${works[*]}")" -duration 360s -ready-file "$work/server.ready" -stats "$work/server.json" \
		2>"$work/server.err" &
	pid=$!
	cleanup_push "stop_process $pid TERM 5"
	for i in $(seq 100); do [[ -e $work/server.ready ]] && break; nap 0.05; done
	[[ -e $work/server.ready ]] || { cat "$work/server.err" >&2; die "loopserver did not become ready"; }
	LOOP_PID=$pid SERVER_PID=$pid
	mapfile -t LOOP_TIDS < <(loop_threads "$LOOP_PID")
	((${#LOOP_TIDS[@]} == 4)) || die "found ${#LOOP_TIDS[@]} loop threads in loopserver (pid $LOOP_PID), not 4"
	mkdir -p "$run/lab"
	sample_thread_stat "$run/lab/task-stat.csv" "$work/samplers.stop" "$LOOP_PID" "${LOOP_TIDS[@]}" &
	cleanup_push "kill_tree $! KILL"
	printf 'function delay()\n\treturn 20\nend\n' >"$work/pace.lua"
	nap 1
	ip netns exec "$CLI_NS" wrk -t1 -c2 -d"${LOAD_SECONDS}s" -s "$work/pace.lua" "http://$SRV_IP:$LAB_PORT/" \
		>"$work/wrk-light.txt" 2>&1 &
	light=$!
	t0=${EPOCHREALTIME/,/.}
	rps=$(run_wrk "$work/wrk.txt" "$((LAB_PORT + HOT_LOOP))")
	PHASES+=("0 $t0 ${EPOCHREALTIME/,/.} $rps")
	wait "$light" || true
	nap "$((interval + 1))"
	touch "$work/samplers.stop"
	stop_process "$pid" TERM 5
}

lab_run() {
	local run=$1 work=$2 pid i t0 rps
	if [[ $variant == hot-thread ]]; then
		run_hot_thread "$run" "$work"
		return 0
	fi
	if [[ $variant == nginx ]]; then
		start_nginx "$work"
		nap 1
		t0=${EPOCHREALTIME/,/.}
		rps=$(run_wrk "$work/wrk.txt")
		PHASES+=("0 $t0 ${EPOCHREALTIME/,/.} $rps")
		SERVER_PID=$(pgrep -P "$NGINX_PID" -x nginx | head -1 || true)
		nap "$((interval + 1))"
		stop_process "$NGINX_PID" TERM 5
		return 0
	fi
	ip netns exec "$SRV_NS" env ${GOMAXPROCS_SRV:+GOMAXPROCS=$GOMAXPROCS_SRV} "$PACK_ROOT/build/bin/httpserver" \
		-listen "$SRV_IP:$LAB_PORT" -work "$WORK" -header-timeout 300s -duration 360s \
		-ready-file "$work/server.ready" -stats "$work/server.json" 2>"$work/server.err" &
	pid=$!
	cleanup_push "stop_process $pid TERM 5"
	for i in $(seq 100); do [[ -e $work/server.ready ]] && break; nap 0.05; done
	[[ -e $work/server.ready ]] || { cat "$work/server.err" >&2; die "httpserver did not become ready"; }
	SERVER_PID=$(pgrep -P "$pid" -x httpserver || echo "$pid")
	nap 1
	case $variant in
	idle)
		t0=${EPOCHREALTIME/,/.}
		nap "$LOAD_SECONDS"
		PHASES+=("0 $t0 ${EPOCHREALTIME/,/.} 0")
		;;
	busy)
		t0=${EPOCHREALTIME/,/.}
		rps=$(run_wrk "$work/wrk.txt")
		PHASES+=("0 $t0 ${EPOCHREALTIME/,/.} $rps")
		;;
	sweep) run_sweep_phases ;;
	esac
	nap "$((interval + 1))"
	stop_process "$pid" TERM 5
}

lab_json() {
	local stats=null p first=1
	[[ -s $work/server.json ]] && stats=$(cat "$work/server.json")
	printf '{"lab": "epoll", "variant": %s, "summary": %s,\n' "$(json_str "$variant")" "$(json_str "$LAB_SUMMARY")"
	printf ' "server": {"netns": %s, "netns_inode": %s, "addr": %s, "port": %d, "pid": %s, "comm": %s, "gomaxprocs": %s, "work": %s, "stats": %s},\n' \
		"$(json_str "$SRV_NS")" "$(netns_inode "$SRV_NS")" "$(json_str "$SRV_IP")" "$LAB_PORT" "${SERVER_PID:-null}" \
		"$(json_str "$SERVER_COMM")" "${GOMAXPROCS_SRV:-null}" "$(json_str "$WORK")" "$stats"
	if [[ $variant == hot-thread ]]; then
		printf ' "loops": {"pid": %s, "tids": [%s], "hot": %s, "stat_file": "lab/task-stat.csv"},\n' \
			"$LOOP_PID" "$(IFS=,; echo "${LOOP_TIDS[*]}")" "$HOT_LOOP"
	fi
	printf ' "client": {"netns": %s, "netns_inode": %s, "wrk_connections": %s},\n' \
		"$(json_str "$CLI_NS")" "$(netns_inode "$CLI_NS")" "$CONNS"
	printf ' "phases": ['
	for p in "${PHASES[@]}"; do
		read -r n t0 t1 rps <<<"$p"
		((first)) || printf ', '
		first=0
		printf '{"idle_conns": %s, "start_s": %s, "end_s": %s, "wrk_requests_per_s": %s}' "$n" "$t0" "$t1" "${rps:-0}"
	done
	printf '],\n "command": %s}\n' "$(json_str "make lab LAB=epoll VARIANT=$variant")"
}
