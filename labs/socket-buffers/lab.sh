# shellcheck shell=bash
# Variables flow both ways with scripts/lab (LAB_* out; variant, interval, SRV_NS... in).
# shellcheck disable=SC2034,SC2154
# Lab socket-buffers: one bulk TCP flow, client -> server, over a path with a delay, where
# one socket buffer is made the bottleneck. The client's bufflow writes as fast as its
# socket takes the bytes (non-blocking, counting the writes that found the send buffer
# full); the server's bufflow reads. The path between the two namespaces is a link of
# PATH_RATE with DELAY each way (RTT 2 x DELAY, so a BDP of PATH_RATE x RTT: 100 KB by
# default): netem where the kernel has it (the matrix guests' Debian kernels), else
# build/bin/delayline in the path namespace, a user-space link of the same rate, queue and
# delay (this host's kernel has no netem), run at real-time priority so that a busy machine
# does not stretch its delay; its own account (frames, drops, how late it ever sent one)
# goes into the lab block. The lab's ground truth: both programs' counts, ss -tinm of the
# flow's two sockets every 0.2 s (lab/ss-flow.txt) and each namespace's TcpExt counters
# before and after (lab/netstat-*.txt).
#
# Variants
#   slow-reader   the reader takes 4 KB every 100 ms: its receive queue fills, its window
#                 closes, the writer is held back by it (rwnd_limited) and blocks
#   small-sndbuf  the writer sets SO_SNDBUF 8 KB (the kernel doubles it): far below the
#                 BDP, so the send buffer caps the flow (sndbuf_limited)
#   small-rcvbuf  the reader sets SO_RCVBUF 8 KB before listen(): its window stays far
#                 below the BDP (and autotuning is off), so the flow is held back by a
#                 window the reader empties at once (rwnd_limited, no zero window)
#   healthy       the same path with the kernel's autotuned buffers: nothing found
#   memory-pressure  healthy's flow while the host's TCP memory limit (net.ipv4.tcp_mem, one
#                 for every namespace) is lowered to a few pages: TCP enters memory pressure
#                 (TcpExt TCPMemoryPressures) and stops growing the receiver's window: the
#                 window holds the flow back while the reader keeps its queue empty (the
#                 Debian 13 guest: rwnd_limited 93-99 %, 5 runs). It changes the whole machine's TCP:
#                 it runs only with LAB_HOST_WIDE=1, on a machine of its own (the VM matrix
#                 runs it in its guests); restored at the end, or by the next run's reaper

LAB_VARIANTS=(slow-reader small-sndbuf small-rcvbuf healthy memory-pressure)
# Only this family's probe: the lab's object is one flow's buffers.
LAB_PROBES=socket_buffers
LAB_BINARIES=(bufflow delayline)
LAB_PORT=7000

lab_describe() {
	cat <<TEXT
socket-buffers variants (environment overrides in brackets); one flow for ${LOAD_SECONDS:-6}s [LOAD_SECONDS]
over a ${PATH_RATE:-20mbit} [PATH_RATE] path with ${DELAY:-20ms} [DELAY] each way and a ${QUEUE:-200}-frame queue [QUEUE]
(netem where the kernel has it, else build/bin/delayline [PATH_DELAY=netem|delayline]), congestion
control ${CC:-cubic} on both ends' sockets whatever the host's default [CC]:
  slow-reader   the reader takes 4096 bytes [READ_SIZE] every 100ms [READ_EVERY_SLOW]
  small-sndbuf  the writer's SO_SNDBUF 8192 [SNDBUF]
  small-rcvbuf  the reader's SO_RCVBUF 8192 [RCVBUF]
  healthy       autotuned buffers, a reader as fast as the data
  memory-pressure  healthy's flow with the host's net.ipv4.tcp_mem set to "1 2 MAX" [TCP_MEM]
                (host-wide: only with LAB_HOST_WIDE=1, on a machine of its own)
TEXT
}

lab_params() {
	local want_sndbuf=${SNDBUF:-} want_rcvbuf=${RCVBUF:-} want_read=${READ_SIZE:-}
	LOAD_SECONDS=${LOAD_SECONDS:-6} PATH_RATE=${PATH_RATE:-20mbit} DELAY=${DELAY:-20ms} QUEUE=${QUEUE:-200} CC=${CC:-cubic}
	READ_SIZE=${want_read:-131072} READ_EVERY=0s SNDBUF=0 RCVBUF=0
	case $1 in
	slow-reader) READ_SIZE=${want_read:-4096} READ_EVERY=${READ_EVERY_SLOW:-100ms} ;;
	small-sndbuf) SNDBUF=${want_sndbuf:-8192} ;;
	small-rcvbuf) RCVBUF=${want_rcvbuf:-8192} ;;
	memory-pressure)
		[[ ${LAB_HOST_WIDE:-} == 1 ]] || die "variant memory-pressure lowers net.ipv4.tcp_mem, which is the whole machine's (every namespace's TCP): run it on a machine of its own with LAB_HOST_WIDE=1 (dev/vm/matrix does, in its guests)"
		# Pressure from the second page TCP holds, and the hard limit left where it was (no drops).
		TCP_MEM=${TCP_MEM:-"1 2 $(awk '{print $3}' /proc/sys/net/ipv4/tcp_mem)"}
		;;
	esac
	[[ $PATH_RATE =~ ^([0-9]+)(mbit|kbit)$ ]] || die "PATH_RATE must be like 20mbit or 500kbit, got '$PATH_RATE'"
	RATE_BPS=$((BASH_REMATCH[1] * 1000))
	[[ ${BASH_REMATCH[2]} == kbit ]] || RATE_BPS=$((RATE_BPS * 1000))
	[[ $DELAY =~ ^[0-9]+ms$ ]] || die "DELAY must be whole milliseconds like 20ms, got '$DELAY'"
	DELAY_MS=${DELAY%ms}
	# The path's bandwidth-delay product: rate x RTT (RTT = 2 x DELAY), in bytes.
	BDP_BYTES=$((RATE_BPS * 2 * DELAY_MS / 8000))
	LAB_SUMMARY="one flow for ${LOAD_SECONDS}s ($CC) over $PATH_RATE, RTT $((2 * DELAY_MS))ms (BDP $BDP_BYTES bytes): "
	case $1 in
	slow-reader) LAB_SUMMARY+="the reader takes $READ_SIZE bytes every $READ_EVERY" ;;
	small-sndbuf) LAB_SUMMARY+="the writer's SO_SNDBUF $SNDBUF" ;;
	small-rcvbuf) LAB_SUMMARY+="the reader's SO_RCVBUF $RCVBUF" ;;
	healthy) LAB_SUMMARY+="autotuned buffers" ;;
	memory-pressure) LAB_SUMMARY+="autotuned buffers under TCP memory pressure (the host's tcp_mem $TCP_MEM)" ;;
	esac
	LAB_MAX_SECONDS=$((LOAD_SECONDS + 90))
	LAB_PATH=1
}

# memory-pressure: the host's TCP memory limit lowered for the lab's life, restored by the lab's
# cleanup, or after a SIGKILL by the next run's reaper (a host-sysctl state entry). Linux >= 6.0
# adds a CPU's TCP pages to the host's count (what tcp_mem is checked against) a megabyte at a
# time (net.core.mem_pcpu_rsv, 256 pages at the least): the pressure starts once one CPU has
# charged that much more than it freed, which the flow's queues did in every guest run.
HOST_SYSCTLS_SET=""
lower_tcp_mem() {
	local old
	old=$(sysctl -n net.ipv4.tcp_mem | tr -s '\t ' '  ')
	state_own host-sysctl "net.ipv4.tcp_mem $old"
	cleanup_push "sysctl -qw 'net.ipv4.tcp_mem=$old'"
	sysctl -qw "net.ipv4.tcp_mem=$TCP_MEM" || die "cannot set net.ipv4.tcp_mem to '$TCP_MEM'"
	HOST_SYSCTLS_SET="net.ipv4.tcp_mem=$TCP_MEM"
	log "host-wide for the lab's life: $HOST_SYSCTLS_SET (it was $old)"
}

# The path's delay: netem on both of the path namespace's ports where the kernel has it,
# else delayline between them, off the bridge (PATH_DELAY forces one).
PATH_TOOL="" DELAYLINE_PID=""
lab_setup_netns() {
	local want=${PATH_DELAY:-auto} port
	[[ $variant != memory-pressure ]] || lower_tcp_mem
	if [[ $want != delayline ]] &&
		in_netns "pid:$PATH_NS_PID" tc qdisc add dev pa root netem delay "$DELAY" rate "$PATH_RATE" limit "$QUEUE" 2>/dev/null; then
		in_netns "pid:$PATH_NS_PID" tc qdisc add dev pb root netem delay "$DELAY" rate "$PATH_RATE" limit "$QUEUE" ||
			die "netem on one port of the path and not the other"
		PATH_TOOL=netem
		return 0
	fi
	[[ $want != netem ]] || die "PATH_DELAY=netem: this kernel has no netem (sch_netem)"
	for port in pa pb; do in_netns "pid:$PATH_NS_PID" ip link set "$port" nomaster; done
	# nsenter itself, not through a function: $! is then delayline's own pid (nsenter execs
	# it when it enters no pid namespace), which a TERM stops cleanly, its counts written.
	nsenter --target "$PATH_NS_PID" --net chrt -f 1 env GOMAXPROCS=1 "$PACK_ROOT/build/bin/delayline" -a pa -b pb \
		-delay "$DELAY" -rate "$RATE_BPS" -queue "$QUEUE" -ready-file "$work/path.ready" -stats "$work/path.json" \
		2>"$work/path.err" &
	DELAYLINE_PID=$!
	cleanup_push "stop_process $DELAYLINE_PID TERM 5"
	wait_for_file "$work/path.ready" "$DELAYLINE_PID" path
	PATH_TOOL=delayline
}

# wait_for_file FILE PID NAME: FILE appears while PID lives, or the lab ends with NAME's errors.
wait_for_file() {
	local i
	for i in $(seq 200); do
		[[ -e $1 ]] && return 0
		kill -0 "$2" 2>/dev/null || break
		nap 0.05
	done
	cat "$work/$3.err" >&2 2>/dev/null || true
	die "$3 did not become ready"
}

# Both sockets of the flow, ss -tinm every 0.2 s until the file STOP exists (lab/ss-flow.txt):
# "=== <epoch> <side>" then ss's lines.
sample_flow() {
	local out=$1 stop=$2 now
	while [[ ! -e $stop ]]; do
		now=${EPOCHREALTIME/,/.}
		{
			echo "=== $now sender"
			ip netns exec "$CLI_NS" ss -tinmH state established "( dport = :$LAB_PORT )" 2>/dev/null || true
			echo "=== $now receiver"
			ip netns exec "$SRV_NS" ss -tinmH state established "( sport = :$LAB_PORT )" 2>/dev/null || true
		} >>"$out"
		sleep 0.2
	done
}

netstat_snapshot() {
	ip netns exec "$SRV_NS" cat /proc/net/netstat >"$1/netstat-receiver-$2.txt"
	ip netns exec "$CLI_NS" cat /proc/net/netstat >"$1/netstat-sender-$2.txt"
}

LOAD_START="" LOAD_END=""
# The lab's congestion control, not the host's default, on both ends' sockets (TCP_CONGESTION:
# root may set one the namespace's sysctl may not, where net.ipv4.tcp_allowed_congestion_control
# leaves it out): under bbr (this project's CI machine) pacing leaves bytes unsent in a flow its
# send buffer holds back, and small-sndbuf's verdict came out absent in 1 run of 4 (docs/labs.md).
lab_run() {
	local run=$1 work=$2 sink source sampler
	mkdir -p "$run/lab"
	TQ_SERVER_FLAGS="-io-size $READ_SIZE -read-every $READ_EVERY -rcvbuf $RCVBUF -cc $CC" ip netns exec "$SRV_NS" \
		"$PACK_ROOT/build/bin/bufflow" -role sink -listen "$(host_port "$SRV_IP" "$LAB_PORT")" \
		-duration "${LAB_MAX_SECONDS}s" -ready-file "$work/sink.ready" -stats "$work/sink.json" 2>"$work/sink.err" &
	sink=$!
	cleanup_push "stop_process $sink TERM 5"
	wait_for_file "$work/sink.ready" "$sink" sink
	netstat_snapshot "$run/lab" start
	sample_flow "$run/lab/ss-flow.txt" "$work/sampler.stop" &
	sampler=$!
	cleanup_push "kill_tree $sampler KILL"
	nap 1	# one probe interval of baseline
	LOAD_START=${EPOCHREALTIME/,/.}
	TQ_SERVER_FLAGS="-sndbuf $SNDBUF -cc $CC" ip netns exec "$CLI_NS" "$PACK_ROOT/build/bin/bufflow" -role source \
		-target "$(host_port "$SRV_IP" "$LAB_PORT")" -duration "${LOAD_SECONDS}s" -stats "$work/source.json" \
		2>"$work/source.err" &
	source=$!
	cleanup_push "stop_process $source TERM 5"
	wait "$source" || { cat "$work/source.err" >&2; die "the writer failed"; }
	LOAD_END=${EPOCHREALTIME/,/.}
	# The reader has what it read by now (the writer closed: EOF after the queue, or the
	# reader's own pace); the slow one is stopped.
	nap 0.5
	touch "$work/sampler.stop"
	wait "$sampler" || true
	stop_process "$sink" TERM 5
	# One more interval so the probe and the samplers see the end; then the counters.
	nap "$((interval + 1))"
	netstat_snapshot "$run/lab" end
	[[ -z $DELAYLINE_PID ]] || stop_process "$DELAYLINE_PID" TERM 5
}

lab_json() {
	py_helper "$PACK_ROOT/labs/socket-buffers/lab_json.py" "$work" "$run/lab" \
		variant="$variant" summary="$LAB_SUMMARY" srv_ns="$SRV_NS" srv_inode="$(netns_inode "$SRV_NS")" srv_ip="$SRV_IP" \
		cli_ns="$CLI_NS" cli_inode="$(netns_inode "$CLI_NS")" cli_ip="$CLI_IP" port="$LAB_PORT" \
		load_seconds="$LOAD_SECONDS" load_start="$LOAD_START" load_end="$LOAD_END" \
		path_tool="$PATH_TOOL" path_rate_bps="$RATE_BPS" delay_ms="$DELAY_MS" queue="$QUEUE" bdp_bytes="$BDP_BYTES" \
		read_size="$READ_SIZE" read_every="$READ_EVERY" sndbuf="$SNDBUF" rcvbuf="$RCVBUF" host_sysctls="$HOST_SYSCTLS_SET"
}
