# shellcheck shell=bash
# Shared helpers for the scripts in this folder. Sourced, never run.

PACK_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PACK_ROOT

# The bpftrace to run: BPFTRACE=/path/to/bpftrace (or dev/bpftrace-chroot, Debian 13's 0.23
# on this kernel) for another version than the one on PATH.
BPFTRACE=${BPFTRACE:-bpftrace}
export BPFTRACE

# Point runs/NAME (latest, latest-compare, ...) at DIR: the newest run of its kind a person
# made, for make report and the notebooks. Not when TQ_NO_LATEST is set: the test suite's
# runs live in folders it deletes, and a driver's inner runs are not what a person asked for.
point_latest() {
	[[ -z ${TQ_NO_LATEST:-} ]] || return 0
	mkdir -p "$PACK_ROOT/runs" && ln -sfn "$2" "$PACK_ROOT/runs/$1"
}

# --- The probe families: probes/families.conf, the pack's one registry ----------
FAMILIES_CONF="$PACK_ROOT/probes/families.conf"
# Every family, in the registry's order, one a line.
families() { awk '$1 !~ /^#/ && $2 == "probes" {print $1}' "$FAMILIES_CONF"; }
# The families comma-separated (the form --probes takes).
families_csv() { families | paste -sd, -; }
# The words of one family's key: family_get accept_queue probes
family_get() {
	awk -v f="$1" -v k="$2" '$1 == f && $2 == k {for (i = 3; i <= NF; i++) printf "%s%s", $i, (i < NF ? " " : "\n")}' "$FAMILIES_CONF"
}
# The families a probe tier runs, comma-separated: full, every family; rare, those whose
# tier key is rare (their probes fire on loss and resets only, no syscall hook).
tier_families() {
	if [[ $1 == full ]]; then families_csv; return; fi
	awk -v t="$1" '$1 !~ /^#/ && $2 == "tier" && $3 == t {print $1}' "$FAMILIES_CONF" | paste -sd, -
}

log() { printf '%s: %s\n' "${PROG:-${0##*/}}" "$*" >&2; }
die() { printf '%s: error: %s\n' "${PROG:-${0##*/}}" "$*" >&2; exit 1; }

need_root() {
	[[ $(id -u) -eq 0 ]] || die "must run as root (bpftrace, network namespaces and /proc/net of other namespaces need it)"
}

# JSON string literal for an arbitrary value (quotes, backslashes, control chars).
json_str() {
	local s=$1
	s=${s//\\/\\\\}
	s=${s//\"/\\\"}
	s=${s//$'\n'/\\n}
	s=${s//$'\t'/\\t}
	s=${s//$'\r'/\\r}
	printf '"%s"' "$s"
}

# Cleanup stack: commands run in reverse order on exit, whatever the exit path.
# Each entry is run with eval so it may hold several words; failures are
# ignored so one stuck item never keeps the others from being removed.
CLEANUP_STACK=()
cleanup_push() { CLEANUP_STACK+=("$1"); }
cleanup_run() {
	local i
	# A second Ctrl-C must not cut the cleanup short, nor a reader that went
	# away (SIGPIPE on a log line) or a closed terminal.
	trap '' INT TERM PIPE HUP
	for ((i = ${#CLEANUP_STACK[@]} - 1; i >= 0; i--)); do
		eval "${CLEANUP_STACK[i]}" >/dev/null 2>&1 || true
	done
	CLEANUP_STACK=()
}

# --- What a run owns, so that the next run can remove it after a SIGKILL ----
# Each driver (capture, lab, compare, sweep, bench, setup) registers itself in
# $TQ_STATE_DIR/<pid>.<start time>/: "manifest" lists the namespaces, links,
# nft tables, temporary folders and run directories it made; "parent" names the
# driver that started it. Every process it starts inherits TQ_OWNER=<pid>.<start
# time> in its environment: that marker, not a process name, is how a dead
# run's processes are found. /run is cleared at boot, as namespaces are.
TQ_STATE_DIR=${TQ_STATE_DIR:-/run/tcp-hidden-queues}
TQ_SELF=""

# Start time of a process in clock ticks since boot (field 22 of stat; comm may
# hold spaces and parentheses, so count from the last ')'). Nothing for a
# zombie: it is dead, only not yet waited for.
proc_starttime() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	# shellcheck disable=SC2086
	set -- $stat
	[[ $1 != Z ]] || return 1
	echo "${20}"
}

# Is the owner "<pid>.<start time>" still the same living process?
owner_alive() {
	local pid=${1%.*} st=${1#*.}
	[[ $(proc_starttime "$pid" 2>/dev/null) == "$st" ]]
}

# PIDs of processes carrying the marker of owner $1 (environ is NUL-separated),
# less the drivers among them: a driver started by another (a lab under bench)
# still shows its parent's marker in /proc/PID/environ, but it registered
# itself and cleans up after itself; killing it would cut that short.
marked_pids() {
	local pid
	{ grep -lsxzF "TQ_OWNER=$1" /proc/[0-9]*/environ 2>/dev/null || true; } | awk -F/ '{print $3}' |
		while read -r pid; do
			[[ $pid != "$$" ]] || continue
			compgen -G "$TQ_STATE_DIR/$pid.*/prog" >/dev/null && continue
			echo "$pid"
		done
}

# Remove one thing a dead run's manifest lists (KIND VALUE) and add what was
# removed to the caller's `what` list (reap_dead_runs).
reap_item() {
	local kind=$1 val=$2 fam tbl key value
	case $kind in
	netns)
		[[ -e /run/netns/$val ]] || return 0
		ip netns pids "$val" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
		ip netns del "$val" 2>/dev/null && what+=("netns $val") ;;
	link) ip link del "$val" 2>/dev/null && what+=("link $val") ;;
	nft)
		# "<family> <table>", in the host namespace.
		read -r fam tbl <<<"$val"
		nft delete table "$fam" "$tbl" 2>/dev/null && what+=("nft table $val") ;;
	tmp) [[ -e $val ]] && rm -rf "$val" && what+=("temporary $val") ;;
	run)
		if [[ -f $val/.capture-state ]]; then
			"$PACK_ROOT/collector/capture" --finalize "$val" >/dev/null 2>&1 &&
				what+=("run directory $val marked incomplete")
		fi ;;
	sysctl)
		# A backup written by scripts/sysctl-profile apply --backup.
		[[ -f $val ]] && "$PACK_ROOT/scripts/sysctl-profile" rollback "$val" >/dev/null 2>&1 &&
			what+=("sysctls restored from $val") ;;
	host-sysctl)
		# "<key> <value>": a host sysctl a driver changed (bench: bpf_stats).
		read -r key value <<<"$val"
		sysctl -qw "$key=$value" 2>/dev/null && what+=("$key restored to $value") ;;
	esac
	return 0
}

# Remove what dead runs left; say what. A living driver whose parent driver
# died (killed alone) is asked to stop, and cleans up after itself.
reap_dead_runs() {
	local d owner parent kind val what pids n list
	[[ -d $TQ_STATE_DIR ]] || return 0
	for d in "$TQ_STATE_DIR"/*/; do
		[[ -d $d ]] || continue
		owner=$(basename "$d")
		[[ $owner != "$TQ_SELF" ]] || continue
		if owner_alive "$owner"; then
			parent=$(cat "$d/parent" 2>/dev/null || true)
			if [[ -n $parent ]] && ! owner_alive "$parent"; then
				# Its parent was killed and it was not: it cleans up on TERM.
				log "a $(cat "$d/prog" 2>/dev/null || echo driver) run (pid ${owner%.*}) outlived the driver that started it: stopping it"
				kill -TERM "${owner%.*}" 2>/dev/null || true
				for _ in $(seq 300); do owner_alive "$owner" || break; sleep 0.1; done
			fi
			owner_alive "$owner" && continue
		fi
		what=()
		# Processes first (they may hold namespaces); SIGKILL: their owner is gone.
		pids=$(marked_pids "$owner" | tr '\n' ' ')
		if [[ -n ${pids// /} ]]; then
			# shellcheck disable=SC2086
			kill -KILL $pids 2>/dev/null || true
			n=$(wc -w <<<"$pids")
			what+=("$n process(es)")
		fi
		if [[ -f $d/manifest ]]; then
			while IFS=$'\t' read -r kind val; do
				reap_item "$kind" "$val"
			done <"$d/manifest"
		fi
		if ((${#what[@]})); then
			list=$(printf '%s, ' "${what[@]}")
			log "removed what a dead $(cat "$d/prog" 2>/dev/null || echo driver) run (pid ${owner%.*}) left: ${list%, }"
		fi
		rm -rf "$d"
	done
}

# Register this driver (after argument parsing; needs root). Reaps first.
state_init() {
	reap_dead_runs
	TQ_SELF="$$.$(proc_starttime $$)"
	mkdir -p "$TQ_STATE_DIR/$TQ_SELF"
	echo "${PROG:-${0##*/}}" >"$TQ_STATE_DIR/$TQ_SELF/prog"
	[[ -z ${TQ_OWNER:-} ]] || echo "$TQ_OWNER" >"$TQ_STATE_DIR/$TQ_SELF/parent"
	export TQ_OWNER=$TQ_SELF
}
# Record something this run made: state_own netns|link|nft|tmp|run|sysctl VALUE
state_own() {
	[[ -n $TQ_SELF ]] || return 0
	printf '%s\t%s\n' "$1" "$2" >>"$TQ_STATE_DIR/$TQ_SELF/manifest"
}
# The run ended and cleaned up: nothing for anybody to reap. Anything still
# carrying our marker escaped the cleanup (a child reparented before
# kill_tree saw it, say): it goes now.
state_done() {
	local pids
	[[ -n $TQ_SELF ]] || return 0
	pids=$(marked_pids "$TQ_SELF" | tr '\n' ' ')
	# shellcheck disable=SC2086
	[[ -z ${pids// /} ]] || kill -KILL $pids 2>/dev/null || true
	rm -rf "${TQ_STATE_DIR:?}/$TQ_SELF"
}

# Make sure tracefs (and debugfs, which older bpftrace looks in) are mounted:
# on a fresh boot of this kind of machine they are not, and bpftrace then
# cannot find any tracepoint.
ensure_tracefs() {
	if [[ ! -e /sys/kernel/tracing/events ]]; then
		mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
	fi
	if [[ -d /sys/kernel/debug && ! -e /sys/kernel/debug/tracing/events ]] &&
		! mountpoint -q /sys/kernel/debug; then
		mount -t debugfs nodev /sys/kernel/debug 2>/dev/null || true
	fi
	[[ -e /sys/kernel/tracing/events || -e /sys/kernel/debug/tracing/events ]]
}

# Ask a process to stop with a signal, wait up to SECONDS for it, then KILL it
# and its children. (Background jobs of a script ignore SIGINT, so TERM it is.)
stop_process() {
	local pid=$1 sig=${2:-TERM} secs=${3:-15} i
	kill "-$sig" "$pid" 2>/dev/null || return 0
	for ((i = 0; i < secs * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill_tree "$pid" KILL
}

# Kill a process and everything below it; wait for it if it is our child.
kill_tree() {
	local pid=$1 sig=${2:-TERM} child
	[[ -n $pid ]] || return 0
	for child in $(pgrep -P "$pid" 2>/dev/null); do
		kill_tree "$child" "$sig"
	done
	kill "-$sig" "$pid" 2>/dev/null || true
}

# PSS in bytes of PID and every process below it, together (smaps_rollup):
# what they add to the host's memory, shared pages split among their users.
tree_pss() {
	local pid=$1 p kb total=0
	for p in $pid $(tree_pids "$pid"); do
		kb=$(awk '/^Pss:/ {print $2}' "/proc/$p/smaps_rollup" 2>/dev/null || true)
		total=$((total + ${kb:-0} * 1024))
	done
	echo "$total"
}
# CPU clock ticks (USER_HZ) used by PID and every process below it: their own
# user and system time, plus that of their children they have waited for (a
# sampler's ss and awk, gone by the time it is read). The difference of two
# reads is what the tree ran in between, give or take a child that started
# before the first read and was waited for after it.
tree_cpu_ticks() {
	local pid=$1 p stat total=0
	local -a f
	for p in $pid $(tree_pids "$pid"); do
		{ stat=$(<"/proc/$p/stat"); } 2>/dev/null || continue
		# After the last ")": comm may hold spaces and parentheses.
		read -r -a f <<<"${stat##*) }"
		# Fields 14-17 of stat (utime stime cutime cstime) are 12-15 after comm.
		total=$((total + f[11] + f[12] + f[13] + f[14]))
	done
	echo "$total"
}
tree_pids() {
	local child
	for child in $(pgrep -P "$1" 2>/dev/null); do
		echo "$child"
		tree_pids "$child"
	done
}

# Inode number of a network namespace (what the probes report as netns):
# the host's when the name is empty.
# A network namespace a capture samples is named one of four ways: an `ip netns`
# name, pid:N (the namespace process N lives in), container:NAME (a podman or
# docker container's, by name or id) or inode:N (the namespace whose inode is N, as
# the probes and a report name one); "" is the host's. resolve_netns turns
# container:NAME into pid:N (the runtime's own record of its main process), inode:N
# into the ip netns name or a pid living there, or fails.
resolve_netns() {
	local ns=$1 pid=""
	case $ns in
	inode:*) netns_by_inode "${ns#inode:}" ;;
	container:*)
		if command -v podman >/dev/null; then
			pid=$(podman inspect --format '{{.State.Pid}}' "${ns#container:}" 2>/dev/null) || pid=""
		fi
		if [[ ! $pid =~ ^[1-9][0-9]*$ ]] && command -v docker >/dev/null && [[ -S /var/run/docker.sock ]]; then
			pid=$(docker inspect --format '{{.State.Pid}}' "${ns#container:}" 2>/dev/null) || pid=""
		fi
		[[ $pid =~ ^[1-9][0-9]*$ ]] || return 1
		echo "pid:$pid"
		;;
	pid:*) [[ ${ns#pid:} =~ ^[1-9][0-9]*$ && -e /proc/${ns#pid:}/ns/net ]] && echo "$ns" ;;
	*) [[ -e /run/netns/$ns ]] && echo "$ns" ;;
	esac
}

# netns_by_inode N: the ip netns name of namespace inode N, else pid:P of a process in it.
netns_by_inode() {
	local want=$1 path ino
	[[ $want =~ ^[1-9][0-9]*$ ]] || return 1
	while read -r path ino; do
		[[ $ino == "$want" ]] || continue
		case $path in
		/run/netns/*) echo "${path#/run/netns/}" ;;
		*) path=${path#/proc/}; echo "pid:${path%%/*}" ;;
		esac
		return 0
	done < <(stat -L -c '%n %i' /run/netns/* /proc/[0-9]*/ns/net 2>/dev/null)
	return 1
}

netns_inode() {
	local ns=${1:-}
	case $ns in
	"") stat -L -c %i /proc/self/ns/net ;;
	pid:*) stat -L -c %i "/proc/${ns#pid:}/ns/net" ;;
	*) stat -L -c %i "/run/netns/$ns" ;;
	esac
}

# Run a command in a network namespace (named as resolve_netns says), or on the host when "".
in_netns() {
	local ns=$1
	shift
	case $ns in
	"") "$@" ;;
	pid:*) nsenter --target "${ns#pid:}" --net "$@" ;;
	*) ip netns exec "$ns" "$@" ;;
	esac
}

# sleep that a signal interrupts at once (bash runs a trap only after the
# foreground command ends; a background sleep and wait end at the signal). The
# sleep goes with it: it carries its caller's TQ_OWNER, and would outlive it.
nap() {
	sleep "$1" &
	local pid=$!
	wait "$pid" || true
	kill "$pid" 2>/dev/null || true
}

# --- What collector/doctor picked, and what the kernel skipped ---------------
# The probe file to run for a family: collector/doctor's answer ("families" in
# its JSON: the family's own probe where it runs, else its best fallback tier
# <family>.<tier>.bt), as an absolute path; nothing when no tier can run here
# or the doctor file is missing.  pick_probe DOCTOR_JSON FAMILY
pick_probe() {
	local doctor_json=$1 family=$2 f
	[[ -f $doctor_json ]] || return 0
	f=$(tr -d '\n' <"$doctor_json" | grep -o "\"families\": {.*" | grep -o "\"$family\": {\"file\": \"[^\"]*\"" | sed 's/.*"file": "//; s/"$//')
	if [[ -n $f && -f $PACK_ROOT/$f ]]; then echo "$PACK_ROOT/$f"; fi
}

# The tier a probe file declares in its header (" * TIER: tracepoint").  probe_tier FILE
probe_tier() { sed -n 's/^ \* TIER: *//p' "$1" | head -1; }

# Events the kernel skipped for a running bpftrace (a tracepoint program does not run
# while another BPF program runs on its CPU): the recursion_misses of its programs'
# fdinfo (Linux >= 5.12; 0 without), summed; read them before it exits. Two processes
# whatever the fds: a bpftool per program was too slow (docs/cost.md).
#   probe_recursion_misses PID
probe_recursion_misses() {
	# cat fails for a process that has exited, or an fd closed while it reads: what it read counts.
	# A program is counted once, however many fds hold it (prog_id comes first in each block).
	{ cat /proc/"$1"/fdinfo/* 2>/dev/null || true; } |
		awk '$1 == "prog_id:" { id = $2 } $1 == "recursion_misses:" && !seen[id]++ { total += $2 } END { print total + 0 }'
}

venv_python() { printf '%s/.venv/bin/python' "$PACK_ROOT"; }

# A short Python helper (a JSON writer, a summary) run to its end even when a
# Ctrl-C reaches the process group: it starts with SIGINT ignored, so Python
# installs no KeyboardInterrupt handler and prints no traceback half-way
# through its imports; the caller's own INT trap runs once it returns.
#   py_helper SCRIPT.py ARGS...
py_helper() { (trap '' INT && exec "$(venv_python)" "$@"); }

# Two namespaces joined by a veth pair: "<a> <a_ip>/24" <-> "<b> <b_ip>/24"
# (IPv6 addresses: /64). Addresses come from 198.18.0.0/15 or 2001:2::/48, the
# ranges RFC 2544 and RFC 5180 set aside for benchmarking, and live only inside
# the namespaces this creates; the host never routes to them. Registers its own cleanup.
#   make_netns_pair A A_IP B B_IP [path]
# With "path" the pair runs through a third namespace, the network between the
# two hosts: a bridge between two veth pairs, in a namespace with no name (not in
# `ip netns list`), held by a process of this run (PATH_NS_PID; it goes with the
# lab, or with its TQ_OWNER marker when the next run reaps). A lab drops packets
# there (nsenter --target "$PATH_NS_PID" --net nft ...): on neither host, as on a
# real path, so a trainee's `nft list ruleset` on the server shows nothing.
PATH_NS_PID=""
make_netns_pair() {
	local a=$1 a_ip=$2 b=$3 b_ip=$4 path=${5:-} veth_a veth_b
	veth_a="va${RANDOM}" veth_b="vb${RANDOM}"
	state_own netns "$a"
	ip netns add "$a" || die "cannot create network namespace $a"
	cleanup_push "ip netns pids '$a' | xargs -r kill -9; ip netns del '$a'"
	state_own netns "$b"
	ip netns add "$b" || die "cannot create network namespace $b"
	cleanup_push "ip netns pids '$b' | xargs -r kill -9; ip netns del '$b'"
	if [[ $path == path ]]; then
		make_path_netns
		ip link add "$veth_a" netns "$a" type veth peer name pa netns "$PATH_NS_PID"
		ip link add "$veth_b" netns "$b" type veth peer name pb netns "$PATH_NS_PID"
		in_netns "pid:$PATH_NS_PID" ip link set pa master br0 up
		in_netns "pid:$PATH_NS_PID" ip link set pb master br0 up
	else
		ip link add "$veth_a" netns "$a" type veth peer name "$veth_b" netns "$b"
	fi
	# An IPv6 address is usable at once (nodad): duplicate address detection would
	# hold it "tentative" for a second or two, and a server's bind fail meanwhile.
	if [[ $a_ip == *:* ]]; then
		ip -n "$a" addr add "$a_ip/64" dev "$veth_a" nodad
		ip -n "$b" addr add "$b_ip/64" dev "$veth_b" nodad
	else
		ip -n "$a" addr add "$a_ip/24" dev "$veth_a"
		ip -n "$b" addr add "$b_ip/24" dev "$veth_b"
	fi
	ip -n "$a" link set lo up
	ip -n "$b" link set lo up
	ip -n "$a" link set "$veth_a" up
	ip -n "$b" link set "$veth_b" up
}

# host_port IP PORT: IP:PORT, the IPv6 address in brackets ([2001:2::1]:8080), as
# servers, clients and URLs take it.
# loop_threads PID: the tids of loopserver PID's loop threads (named loop<N>), loop0's first.
loop_threads() {
	local t comm
	for t in /proc/"$1"/task/*; do
		comm=$(cat "$t/comm" 2>/dev/null) || continue
		[[ $comm != loop[0-9]* ]] || echo "${comm#loop} ${t##*/}"
	done | sort -n | cut -d' ' -f2
}

# sample_thread_stat OUT STOP PID TID...: a lab's own account of its threads' CPU time, as the
# kernel keeps it: every 0.5 s until the file STOP exists, a row per thread of its utime and
# stime (clock ticks, fields 14 and 15 of /proc/PID/task/TID/stat) into OUT (CSV).
sample_thread_stat() {
	local out=$1 stop=$2 pid=$3 t stat now comm tids
	shift 3
	tids=("$@")	# set -- below takes the positional parameters
	echo "time_s,tid,comm,utime_ticks,stime_ticks" >"$out"
	while [[ ! -e $stop ]]; do
		now=${EPOCHREALTIME/,/.}
		for t in "${tids[@]}"; do
			stat=$(cat "/proc/$pid/task/$t/stat" 2>/dev/null) || continue
			comm=${stat#*(}
			comm=${comm%)*}
			stat=${stat##*) }
			# shellcheck disable=SC2086  # the fields, split on purpose
			set -- $stat
			echo "$now,$t,$comm,${12},${13}" >>"$out"
		done
		sleep 0.5
	done
}

host_port() {
	if [[ $1 == *:* ]]; then echo "[$1]:$2"; else echo "$1:$2"; fi
}

# The path namespace of make_netns_pair: a sleeping process in a network
# namespace of its own, with a bridge (no STP: its ports forward at once).
make_path_netns() {
	unshare --net sleep infinity </dev/null &>/dev/null &
	PATH_NS_PID=$!
	cleanup_push "kill -9 $PATH_NS_PID 2>/dev/null; wait $PATH_NS_PID 2>/dev/null"
	for _ in $(seq 50); do
		[[ /proc/$PATH_NS_PID/ns/net -ef /proc/self/ns/net ]] || break
		kill -0 "$PATH_NS_PID" 2>/dev/null || die "cannot create the path namespace (unshare --net)"
		nap 0.05
	done
	[[ ! /proc/$PATH_NS_PID/ns/net -ef /proc/self/ns/net ]] || die "the path namespace did not appear"
	in_netns "pid:$PATH_NS_PID" ip link add br0 type bridge stp_state 0
	in_netns "pid:$PATH_NS_PID" ip link set br0 up
}
