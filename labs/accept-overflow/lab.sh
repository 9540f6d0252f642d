# shellcheck shell=bash
# Variables flow both ways with scripts/lab (LAB_* out; variant, interval, SRV_NS... in).
# shellcheck disable=SC2034,SC2154
# Lab accept-overflow: a Go server in one namespace, a connection load
# generator in another, joined by a veth. Sourced by scripts/lab, which owns
# the namespaces, the capture and the cleanup; this file says what runs.
#
# Variants
#   sizing   bursts of BURST connections against a small listen backlog with a
#            slow accept path: the queue overflows at each burst although the
#            server keeps up on average. Cure: a backlog >= the burst.
#   stall    steady arrivals; the server stops calling accept() for STALL_FOR
#            (a blocked event loop). The queue fills and overflows whatever
#            the backlog; a bigger one only delays it.
#   healthy  ample backlog, fast accept: must produce no overflow finding.
#   queue    Poisson arrivals at a server whose accept path takes an
#            exponentially distributed time: an M/M/1/K queue, the workload
#            that scripts/sweep runs over rates x backlogs to check the model.
#   reuseport-stall     a SO_REUSEPORT group of MEMBERS processes, each with its
#            own socket and queue; one of them stops calling accept(). The kernel
#            keeps hashing its share of new connections to it: its queue alone
#            overflows while the others stay healthy.
#   reuseport-overload  the same group with a slow accept path in every member
#            and more arrivals than all of them together accept: every queue
#            overflows (one finding about the group).

LAB_VARIANTS=(sizing stall healthy queue reuseport-stall reuseport-overload)
# Probes this lab loads (collector/capture records all four by default). Fewer
# probes, fewer recursion misses: the kernel skips a tracepoint program while
# another BPF program runs on the same CPU, and the epoll probe runs on every
# epoll call. CAPTURE_PROBES overrides.
LAB_PROBES=accept_queue,retransmits
LAB_BINARIES=(aqserver connload)
LAB_PORT=8080

lab_describe() {
	cat <<TEXT
accept-overflow variants (environment overrides in brackets):
  sizing   backlog 16 [BACKLOG], accept delay 2ms [ACCEPT_DELAY], bursts of 100 [BURST]
           every 1s [BURST_EVERY] for 6s [LOAD_SECONDS]
  stall    backlog 128, no accept delay, 300 conn/s [RATE] for 7s; accept() stops at 2s
           [STALL_AT] for 3s [STALL_FOR]
  healthy  backlog 1024, no accept delay, 300 conn/s for 6s
  queue    backlog 32, accept delay exponential with mean 2ms [ACCEPT_DELAY] (mu ~ 390/s measured:
           Go's timers add ~0.6 ms per accept),
           Poisson arrivals at 600 conn/s [RATE] for 6s
  reuseport-stall     4 member processes [MEMBERS] with backlog 16 each, 300 conn/s for 7s;
           member 1 [STALL_MEMBERS] stops accepting at 2s [STALL_AT] for 3s [STALL_FOR]
  reuseport-overload  4 members [MEMBERS], backlog 16, accept delay 10ms (exponential) each,
           Poisson arrivals at 800 conn/s [RATE] for 6s
  all:     ARRIVALS=even|poisson, DELAY_DIST=fixed|exp, SEED=n; BACKLOG=0 asks for
           net.core.somaxconn like Go's net.Listen does
  all:     connect timeout 4s [CONNECT_TIMEOUT], reply timeout 5s [IO_TIMEOUT]
TEXT
}

lab_params() {
	case $1 in
	sizing)
		BACKLOG=${BACKLOG:-16} ACCEPT_DELAY=${ACCEPT_DELAY:-2ms} STALL_AT=${STALL_AT:-0s} STALL_FOR=${STALL_FOR:-0s}
		LOAD_ARGS=(-mode burst -burst "${BURST:-100}" -burst-every "${BURST_EVERY:-1s}" -duration "${LOAD_SECONDS:-6}s")
		;;
	stall)
		BACKLOG=${BACKLOG:-128} ACCEPT_DELAY=${ACCEPT_DELAY:-0s} STALL_AT=${STALL_AT:-2s} STALL_FOR=${STALL_FOR:-3s}
		LOAD_ARGS=(-mode rate -rate "${RATE:-300}" -duration "${LOAD_SECONDS:-7}s")
		;;
	healthy)
		BACKLOG=${BACKLOG:-1024} ACCEPT_DELAY=${ACCEPT_DELAY:-0s} STALL_AT=${STALL_AT:-0s} STALL_FOR=${STALL_FOR:-0s}
		LOAD_ARGS=(-mode rate -rate "${RATE:-300}" -duration "${LOAD_SECONDS:-6}s")
		;;
	queue)
		BACKLOG=${BACKLOG:-32} ACCEPT_DELAY=${ACCEPT_DELAY:-2ms} STALL_AT=${STALL_AT:-0s} STALL_FOR=${STALL_FOR:-0s}
		ARRIVALS=${ARRIVALS:-poisson} DELAY_DIST=${DELAY_DIST:-exp}
		LOAD_ARGS=(-mode rate -rate "${RATE:-600}" -duration "${LOAD_SECONDS:-6}s")
		;;
	reuseport-stall)
		MEMBERS=${MEMBERS:-4} STALL_MEMBERS=${STALL_MEMBERS:-1}
		BACKLOG=${BACKLOG:-16} ACCEPT_DELAY=${ACCEPT_DELAY:-0s} STALL_AT=${STALL_AT:-2s} STALL_FOR=${STALL_FOR:-3s}
		LOAD_ARGS=(-mode rate -rate "${RATE:-300}" -duration "${LOAD_SECONDS:-7}s")
		;;
	reuseport-overload)
		MEMBERS=${MEMBERS:-4} STALL_MEMBERS=${STALL_MEMBERS:-}
		BACKLOG=${BACKLOG:-16} ACCEPT_DELAY=${ACCEPT_DELAY:-10ms} STALL_AT=${STALL_AT:-0s} STALL_FOR=${STALL_FOR:-0s}
		ARRIVALS=${ARRIVALS:-poisson} DELAY_DIST=${DELAY_DIST:-exp}
		LOAD_ARGS=(-mode rate -rate "${RATE:-800}" -duration "${LOAD_SECONDS:-6}s")
		;;
	esac
	MEMBERS=${MEMBERS:-0} STALL_MEMBERS=${STALL_MEMBERS:-}
	ARRIVALS=${ARRIVALS:-even} DELAY_DIST=${DELAY_DIST:-fixed} SEED=${SEED:-1}
	[[ ${LOAD_ARGS[1]} == burst ]] || LOAD_ARGS+=(-arrivals "$ARRIVALS" -seed "$SEED")
	CONNECT_TIMEOUT=${CONNECT_TIMEOUT:-4s} IO_TIMEOUT=${IO_TIMEOUT:-5s}
	LAB_SUMMARY="backlog $BACKLOG, accept delay $ACCEPT_DELAY ($DELAY_DIST), stall ${STALL_FOR} at ${STALL_AT}, load: ${LOAD_ARGS[*]}"
	if ((MEMBERS)); then
		LAB_SUMMARY="SO_REUSEPORT group of $MEMBERS members (stalling: ${STALL_MEMBERS:-none}), $LAB_SUMMARY"
	fi
}

# Nothing to tune for this lab: namespaces keep the kernel defaults.
lab_setup_netns() { :; }

lab_run() {
	local run=$1 work=$2 server_pid i group=()
	((MEMBERS == 0)) || group=(-reuseport "$MEMBERS" -stall-members "$STALL_MEMBERS")
	ip netns exec "$SRV_NS" "$PACK_ROOT/build/bin/aqserver" -listen "$SRV_IP:$LAB_PORT" -backlog "$BACKLOG" \
		-accept-delay "$ACCEPT_DELAY" -accept-delay-dist "$DELAY_DIST" -seed "$SEED" -stall-at "$STALL_AT" -stall-for "$STALL_FOR" -duration 120s \
		"${group[@]}" -ready-file "$work/server.ready" -stats "$work/server.json" 2>"$work/server.err" &
	server_pid=$!
	cleanup_push "stop_process $server_pid TERM 5"
	for i in $(seq 100); do
		[[ -e $work/server.ready ]] && break
		kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.err" >&2; die "aqserver failed to start"; }
		nap 0.05
	done
	((i < 100)) || die "aqserver did not become ready"
	# Let one probe interval pass with the listener idle, as a baseline.
	nap 1
	ip netns exec "$CLI_NS" "$PACK_ROOT/build/bin/connload" -target "$SRV_IP:$LAB_PORT" "${LOAD_ARGS[@]}" \
		-connect-timeout "$CONNECT_TIMEOUT" -io-timeout "$IO_TIMEOUT" -out "$run/connects.csv" 2> >(sed 's/^/  /' >&2) ||
		die "connload failed"
	# One more interval so the probe prints the tail of the load.
	nap "$((interval + 1))"
	kill -TERM "$server_pid" 2>/dev/null || true
	wait "$server_pid" 2>/dev/null || true
}

lab_json() {
	local stats=null
	[[ -s $work/server.json ]] && stats=$(cat "$work/server.json")
	printf '{"lab": "accept-overflow", "variant": %s, "summary": %s,\n' "$(json_str "$variant")" "$(json_str "$LAB_SUMMARY")"
	printf ' "server": {"netns": %s, "netns_inode": %s, "addr": %s, "port": %d, "backlog_requested": %d, "accept_delay": %s, "accept_delay_dist": %s, "stall_at": %s, "stall_for": %s, "reuseport_members": %d, "stall_members": %s, "stats": %s},\n' \
		"$(json_str "$SRV_NS")" "$(netns_inode "$SRV_NS")" "$(json_str "$SRV_IP")" "$LAB_PORT" "$BACKLOG" \
		"$(json_str "$ACCEPT_DELAY")" "$(json_str "$DELAY_DIST")" "$(json_str "$STALL_AT")" "$(json_str "$STALL_FOR")" \
		"$MEMBERS" "$(json_str "$STALL_MEMBERS")" "$stats"
	printf ' "client": {"netns": %s, "netns_inode": %s, "addr": %s, "load": %s, "arrivals": %s, "connect_timeout": %s, "io_timeout": %s, "connects_file": "connects.csv"},\n' \
		"$(json_str "$CLI_NS")" "$(netns_inode "$CLI_NS")" "$(json_str "$CLI_IP")" "$(json_str "${LOAD_ARGS[*]}")" "$(json_str "$ARRIVALS")" "$(json_str "$CONNECT_TIMEOUT")" "$(json_str "$IO_TIMEOUT")"
	printf ' "command": %s}\n' "$(json_str "make lab LAB=accept-overflow VARIANT=$variant")"
}
