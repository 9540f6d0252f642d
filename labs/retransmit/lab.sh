# shellcheck shell=bash
# Variables flow both ways with scripts/lab (LAB_* out; variant, interval, SRV_NS... in).
# shellcheck disable=SC2034,SC2154
# Lab retransmit: loss injected on the wire between two namespaces, and the
# sender's retransmits measured by the probe and by the kernel's counters.
# This kernel has no netem, so loss is an nftables random-drop rule in the
# RECEIVER's input hook: to the sender that is loss on the wire (a drop in the
# sender's own output hook is a local error that TCP re-sends without counting
# a retransmission). The rule lives in the server namespace and goes with it.
# SENDER_DROP_PCT adds exactly that local drop (the client's own OUTPUT hook):
# its retransmits dropped there are counted by the kernel in RetransSegs and
# TCPRetransFail all the same, and the probe must count them as the kernel does.
#
# Variants
#   loss1    iperf3 client -> server, 1 % of the client's packets dropped
#            (one segment a packet, as on a wire)
#   loss0    the same without loss: must produce no finding
#   loss5    5 % dropped, GSO on: a drop loses a skb of up to 45 segments and a
#            retransmit re-sends many (the probe's segments-per-event path)
#   synloss  short connections (connload -> aqserver), 30 % of SYNs dropped

LAB_VARIANTS=(loss1 loss0 loss5 synloss)
# Probes this lab loads (collector/capture records all four by default). Fewer
# probes, fewer recursion misses: the kernel skips a tracepoint program while
# another BPF program runs on the same CPU, and the epoll probe runs on every
# epoll call. CAPTURE_PROBES overrides.
LAB_PROBES=retransmits,accept_queue
LAB_BINARIES=(aqserver connload)
IPERF_PORT=5201
AQ_PORT=8080

lab_describe() {
	cat <<TEXT
retransmit variants (environment overrides in brackets):
  loss1    iperf3 ${IPERF_SECONDS:-5}s [IPERF_SECONDS] at ${IPERF_RATE:-200M} [IPERF_RATE], 1 % loss [LOSS_PCT], GSO off [GSO]
           (any iperf3 variant: [SENDER_DROP_PCT] % of the client's packets dropped by its own firewall too)
  loss0    the same, no loss
  loss5    the same, 5 % loss, GSO on
  synloss  connload 50 conn/s [RATE] for 6s [LOAD_SECONDS], 30 % of SYNs dropped [SYN_LOSS_PCT]
TEXT
}

lab_params() {
	local want_loss=${LOSS_PCT:-} want_syn=${SYN_LOSS_PCT:-}
	LOSS_PCT=0 SYN_LOSS_PCT=0
	case $1 in
	loss1) LOSS_PCT=${want_loss:-1} ;;
	loss5) LOSS_PCT=${want_loss:-5} ;;
	synloss) SYN_LOSS_PCT=${want_syn:-30} ;;
	esac
	IPERF_SECONDS=${IPERF_SECONDS:-5} IPERF_RATE=${IPERF_RATE:-200M} SENDER_DROP_PCT=${SENDER_DROP_PCT:-0}
	if [[ $1 == loss5 ]]; then GSO=${GSO:-on}; else GSO=${GSO:-off}; fi
	[[ $GSO == on || $GSO == off ]] || die "GSO must be on or off, not '$GSO'"
	[[ $1 != synloss ]] || SENDER_DROP_PCT=0
	if [[ $1 == synloss ]]; then
		LAB_SUMMARY="connload ${RATE:-50}/s for ${LOAD_SECONDS:-6}s to aqserver, ${SYN_LOSS_PCT}% of SYNs dropped at the server"
	else
		LAB_SUMMARY="iperf3 ${IPERF_SECONDS}s at ${IPERF_RATE}b/s, ${LOSS_PCT}% of client->server packets dropped at the server, GSO $GSO"
		((SENDER_DROP_PCT == 0)) || LAB_SUMMARY+=", ${SENDER_DROP_PCT}% by the client's own firewall"
	fi
}

# The drop rule: nftables' numgen gives a uniform random number per packet.
lab_setup_netns() {
	command -v nft >/dev/null || die "nft (nftables) is not installed (run: make setup)"
	command -v iperf3 >/dev/null || die "iperf3 is not installed (run: make setup)"
	local rule="" veth
	# A wire loses packets, not 64 KiB GSO skbs. GSO off: the client's veth sends one
	# segment a packet, so each drop is one segment and each retransmit one (with GSO,
	# 1 % of skbs dropped made 15-20 retransmits of up to 45 segments a run, and the
	# measured rate swung across the rule's threshold under CPU load).
	if [[ $GSO == off ]]; then
		veth=$(ip -n "$CLI_NS" -o link show type veth | awk -F': ' '{ sub(/@.*/, "", $2); print $2; exit }')
		if ! ip -n "$CLI_NS" link set dev "$veth" gso_max_segs 1; then
			log "warning: this kernel does not change gso_max_segs of a link: GSO stays on"
			GSO=on
		fi
	fi
	if ((LOSS_PCT > 0)); then
		rule="ip saddr $CLI_IP tcp dport $IPERF_PORT numgen random mod 100 < $LOSS_PCT drop"
	elif ((SYN_LOSS_PCT > 0)); then
		rule="ip saddr $CLI_IP tcp dport $AQ_PORT tcp flags & (syn | ack) == syn numgen random mod 100 < $SYN_LOSS_PCT drop"
	fi
	if ((SENDER_DROP_PCT > 0)); then
		ip netns exec "$CLI_NS" nft -f - <<NFT || die "could not install the client's nftables drop rule"
table inet tqlocaldrop {
	chain out {
		type filter hook output priority 0; policy accept;
		ip daddr $SRV_IP tcp dport $IPERF_PORT numgen random mod 100 < $SENDER_DROP_PCT drop
	}
}
NFT
	fi
	[[ -n $rule ]] || return 0
	ip netns exec "$SRV_NS" nft -f - <<NFT || die "could not install the nftables drop rule"
table inet tqloss {
	chain inp {
		type filter hook input priority 0; policy accept;
		$rule
	}
}
NFT
}

# Until no client socket has anything left to (re)send: a socket the load closed
# goes on retransmitting its unacknowledged data and FIN in FIN-WAIT-1 (backing
# off, seconds on a busy host). The capture must not end in that tail: the probe's
# last block and the counters' last sample are up to an interval apart.
wait_client_quiet() {
	local i busy dst=$SRV_IP
	[[ $dst != *:* ]] || dst="[$dst]"	# ss reads an IPv6 address in brackets
	for i in $(seq 300); do
		busy=$(ip netns exec "$CLI_NS" ss -tnH state syn-sent state established state fin-wait-1 \
			state closing state last-ack dst "$dst" | wc -l)
		((busy > 0)) || return 0
		nap 0.1
	done
	log "warning: $busy client socket(s) still sending after 30 s"
}

lab_run() {
	local run=$1 work=$2 pid i
	if [[ $variant == synloss ]]; then
		ip netns exec "$SRV_NS" "$PACK_ROOT/build/bin/aqserver" -listen "$SRV_IP:$AQ_PORT" -backlog 1024 \
			-duration 120s -ready-file "$work/server.ready" -stats "$work/server.json" 2>"$work/server.err" &
		pid=$!
		cleanup_push "stop_process $pid TERM 5"
		for i in $(seq 100); do [[ -e $work/server.ready ]] && break; nap 0.05; done
		nap 1
		ip netns exec "$CLI_NS" "$PACK_ROOT/build/bin/connload" -target "$SRV_IP:$AQ_PORT" -mode rate \
			-rate "${RATE:-50}" -duration "${LOAD_SECONDS:-6}s" -connect-timeout 10s \
			-out "$run/connects.csv" 2> >(sed 's/^/  /' >&2) || die "connload failed"
		wait_client_quiet
		nap "$((interval + 1))"
		stop_process "$pid" TERM 5
	else
		ip netns exec "$SRV_NS" iperf3 -s -1 -p "$IPERF_PORT" -B "$SRV_IP" >"$work/iperf3-server.log" 2>&1 &
		pid=$!
		cleanup_push "stop_process $pid TERM 5"
		nap 1.5	# iperf3 has no ready signal; one interval of baseline as well
		ip netns exec "$CLI_NS" iperf3 -c "$SRV_IP" -p "$IPERF_PORT" -t "$IPERF_SECONDS" -b "$IPERF_RATE" -J \
			>"$work/iperf3.json" 2>"$work/iperf3.err" || { cat "$work/iperf3.err" "$work/iperf3.json" >&2; die "iperf3 failed"; }
		wait_client_quiet
		nap "$((interval + 1))"
		stop_process "$pid" TERM 5
	fi
}

lab_json() {
	local iperf=null
	if [[ -s $work/iperf3.json ]]; then
		iperf=$(py_helper "$PACK_ROOT/labs/retransmit/iperf3_summary.py" "$work/iperf3.json" 2>/dev/null || echo null)
	fi
	printf '{"lab": "retransmit", "variant": %s, "summary": %s, "loss_pct": %d, "syn_loss_pct": %d, "sender_drop_pct": %d, "gso": %s,\n' \
		"$(json_str "$variant")" "$(json_str "$LAB_SUMMARY")" "$LOSS_PCT" "$SYN_LOSS_PCT" "$SENDER_DROP_PCT" "$(json_str "$GSO")"
	printf ' "server": {"netns": %s, "netns_inode": %s, "addr": %s, "port": %d},\n' \
		"$(json_str "$SRV_NS")" "$(netns_inode "$SRV_NS")" "$(json_str "$SRV_IP")" \
		"$(if [[ $variant == synloss ]]; then echo $AQ_PORT; else echo $IPERF_PORT; fi)"
	printf ' "client": {"netns": %s, "netns_inode": %s, "addr": %s},\n' \
		"$(json_str "$CLI_NS")" "$(netns_inode "$CLI_NS")" "$(json_str "$CLI_IP")"
	printf ' "iperf3": %s,\n' "$iperf"
	printf ' "command": %s}\n' "$(json_str "make lab LAB=retransmit VARIANT=$variant")"
}
