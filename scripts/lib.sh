# shellcheck shell=bash
# Shared helpers for the scripts in this folder. Sourced, never run.

PACK_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PACK_ROOT

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
	# A second Ctrl-C must not cut the cleanup short.
	trap '' INT TERM
	for ((i = ${#CLEANUP_STACK[@]} - 1; i >= 0; i--)); do
		eval "${CLEANUP_STACK[i]}" >/dev/null 2>&1 || true
	done
	CLEANUP_STACK=()
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

# Inode number of a network namespace (what the probes report as netns):
# the host's when the name is empty.
netns_inode() {
	local ns=${1:-}
	if [[ -z $ns ]]; then
		stat -L -c %i /proc/self/ns/net
	else
		stat -L -c %i "/run/netns/$ns"
	fi
}

# Run a command in a named network namespace, or on the host when the name is empty.
in_netns() {
	local ns=$1
	shift
	if [[ -z $ns ]]; then
		"$@"
	else
		ip netns exec "$ns" "$@"
	fi
}

venv_python() { printf '%s/.venv/bin/python' "$PACK_ROOT"; }

# Two namespaces joined by a veth pair: "<a> <a_ip>/24" <-> "<b> <b_ip>/24".
# Addresses come from 198.18.0.0/15, the range RFC 2544 sets aside for
# benchmarking, and live only inside the namespaces this creates; the host
# never routes to them. Registers its own cleanup.
make_netns_pair() {
	local a=$1 a_ip=$2 b=$3 b_ip=$4 veth_a veth_b
	veth_a="va${RANDOM}" veth_b="vb${RANDOM}"
	ip netns add "$a" || die "cannot create network namespace $a"
	cleanup_push "ip netns pids '$a' | xargs -r kill -9; ip netns del '$a'"
	ip netns add "$b" || die "cannot create network namespace $b"
	cleanup_push "ip netns pids '$b' | xargs -r kill -9; ip netns del '$b'"
	ip link add "$veth_a" netns "$a" type veth peer name "$veth_b" netns "$b"
	ip -n "$a" addr add "$a_ip/24" dev "$veth_a"
	ip -n "$b" addr add "$b_ip/24" dev "$veth_b"
	ip -n "$a" link set lo up
	ip -n "$b" link set lo up
	ip -n "$a" link set "$veth_a" up
	ip -n "$b" link set "$veth_b" up
}
