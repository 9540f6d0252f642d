# shellcheck shell=bash
# Variables flow both ways with scripts/lab (LAB_* out; variant, interval, SRV_NS... in).
# shellcheck disable=SC2034,SC2154
# Lab runtimes: real servers from Debian packages and the toolchains on the
# machine, each started with its defaults (only the port chosen, where a
# server has no default of its own or two would share one) in the server
# namespace, so that the capture measures what each asks listen() for (the
# accept-queue probe's aq_listen rows), the limit the kernel put in force (ss
# Send-Q, listeners.csv), IPv4 / IPv6 / dual-stack, and which executable holds
# it (processes.csv). `python -m analysis runtimes RUN` turns the run into the
# table of docs/runtimes.md; `make runtimes-doc` runs both.
#
# Variants
#   defaults  every server of RUNTIMES that is installed, no load: each is
#             started, waited for until it listens, then stopped.
#   limits    each installed server alone, its own connection limit set low
#             (RUNTIME_LIMITS: its knob; a server without one gets its open-files
#             limit lowered with prlimit once it listens), then 40 idle
#             connections from the client namespace held 3 s (hold_idle.py):
#             what it did past its limit (kept, closed and what it said, left in
#             the accept queue, listen() called again) and the CPU it spent.

LAB_VARIANTS=(defaults limits)
# listen() calls are the accept-queue probe's; nothing else is needed.
LAB_PROBES=accept_queue
LAB_BINARIES=(httpserver)
RUNTIMES_DIR=$PACK_ROOT/labs/runtimes/servers
# name:port, in the table's order. Ports are the servers' own defaults where
# they have one (Redis, memcached, PostgreSQL); nginx and Apache both default
# to 80, so each gets its own.
RUNTIMES=(go-net-http:8081 node-http:3000 python-asyncio:8000 python-http-server:8001
	java-serversocket:7000 java-nio:7001 nginx:8082 redis:6379 memcached:11211 haproxy:8083
	apache:8084 postgresql:5432)
# The limits variant: each server's own connection limit, set low. memcached at -c 24
# or less runs out of descriptors in accept4() before its own check (then it calls
# listen(fd, 0)); at 32 its own limit answers first. The others (no limit of their
# own): open files = what they hold once listening + RUNTIME_FD_HEADROOM.
RUNTIME_LIMITS=(nginx:16 redis:8 memcached:32 haproxy:8 apache:8 postgresql:8)
RUNTIME_FD_HEADROOM=8
# The lab's Java and asyncio servers answer and close each connection without reading:
# they never hold one, so their limit cannot be reached by idle clients.
RUNTIMES_CLOSE_AT_ONCE=(java-serversocket java-nio python-asyncio)

lab_describe() {
	cat <<TEXT
runtimes variants:
  defaults  start each installed server with its defaults in the server namespace, no load:
            $(printf '%s ' "${RUNTIMES[@]%%:*}")
            (a server not installed is listed as such; make setup installs the Debian ones)
  limits    each server alone with its own connection limit set low ($(printf '%s ' "${RUNTIME_LIMITS[@]}"),
            the others' open files: what they hold + $RUNTIME_FD_HEADROOM), 40 idle connections held 3 s:
            what it does past its limit
  RUNTIMES_ONLY="name ..." limits either variant to those servers.
TEXT
}

lab_params() {
	if [[ -n ${RUNTIMES_ONLY:-} ]]; then
		local keep=() entry
		for entry in "${RUNTIMES[@]}"; do
			[[ " $RUNTIMES_ONLY " == *" ${entry%%:*} "* ]] && keep+=("$entry")
		done
		((${#keep[@]})) || die "RUNTIMES_ONLY names no server of: ${RUNTIMES[*]%%:*}"
		RUNTIMES=("${keep[@]}")
	fi
	if [[ $variant == limits ]]; then
		LAB_SUMMARY="each server alone past its own connection limit, 40 idle connections: $(printf '%s ' "${RUNTIMES[@]%%:*}")"
	else
		LAB_SUMMARY="each server with its defaults, no load: $(printf '%s ' "${RUNTIMES[@]%%:*}")"
	fi
	LAB_MAX_SECONDS=300
	# Java compiles its source on start (a few seconds each); PostgreSQL runs initdb.
	RUNTIME_READY_SECONDS=${RUNTIME_READY_SECONDS:-60}
}

lab_setup_netns() { :; }

# The executable a runtime needs, or empty when it is not installed.
runtime_exe() {
	local pg
	case $1 in
	go-net-http) echo "$PACK_ROOT/build/bin/httpserver" ;;
	node-http) command -v node || true ;;
	python-asyncio | python-http-server) [[ -x /usr/bin/python3 ]] && echo /usr/bin/python3 ;;
	java-*) command -v java || true ;;
	nginx | memcached | haproxy) command -v "$1" || true ;;
	redis) command -v redis-server || true ;;
	apache) command -v apache2 || true ;;
	postgresql)
		pg=$(compgen -G '/usr/lib/postgresql/*/bin/postgres' | sort -V | tail -1)
		[[ -n $pg ]] && echo "$pg" ;;
	esac
	return 0
}

# The version the runtime reports of itself, as a version number where it gives one.
runtime_version() {
	local name=$1 exe=$2
	case $name in
	go-net-http) go version "$exe" 2>/dev/null | awk '{print $2}' ;;
	node-http) "$exe" --version ;;
	python-*) "$exe" --version 2>&1 ;;
	java-*) "$exe" -version 2>&1 | sed -n '1s/^\([a-z]*\) version "\([^"]*\)".*/\1 \2/p' ;;
	nginx) "$exe" -v 2>&1 | sed 's/^nginx version: //' ;;
	redis) "$exe" --version | awk '{print "Redis " substr($3, 3)}' ;;
	memcached) "$exe" -V ;;
	haproxy) "$exe" -v | awk 'NR == 1 {print "HAProxy " $3}' ;;
	apache) "$exe" -v | sed -n '1s/^Server version: //p' ;;
	postgresql) "$exe" --version | awk '{print "PostgreSQL " $3}' ;;
	esac 2>/dev/null | head -1 | tr -d '\r'
}

# Start NAME on PORT in the server namespace, its files in DIR; prints its pid.
runtime_start() {
	local name=$1 port=$2 exe=$3 dir=$4 lim=""
	mkdir -p "$dir"
	[[ $variant == limits ]] && lim=$(runtime_limit "$name")
	case $name in
	go-net-http) in_srv "$dir" "$exe" -listen ":$port" ;;
	node-http) in_srv "$dir" "$exe" "$RUNTIMES_DIR/node_http.js" "$port" ;;
	python-asyncio) in_srv "$dir" "$exe" "$RUNTIMES_DIR/asyncio_server.py" "$port" ;;
	python-http-server) in_srv "$dir" "$exe" -m http.server --directory "$dir" "$port" ;;
	java-serversocket) in_srv "$dir" "$exe" "$RUNTIMES_DIR/JavaServerSocket.java" "$port" ;;
	java-nio) in_srv "$dir" "$exe" "$RUNTIMES_DIR/JavaNio.java" "$port" ;;
	nginx)
		mkdir -p "$dir/logs" "$dir/tmp"
		printf '%s\n' "daemon off;" "pid $dir/nginx.pid;" "error_log $dir/logs/error.log;" "events { ${lim:+worker_connections $lim;} }" \
			"http { access_log off; client_body_temp_path $dir/tmp/body; proxy_temp_path $dir/tmp/proxy;" \
			"fastcgi_temp_path $dir/tmp/fastcgi; uwsgi_temp_path $dir/tmp/uwsgi; scgi_temp_path $dir/tmp/scgi;" \
			"server { listen $port; return 200 \"ok\\n\"; } }" >"$dir/nginx.conf"
		in_srv "$dir" "$exe" -p "$dir" -c "$dir/nginx.conf" ;;
	# Past a limit, protected mode off: by default Redis answers every client from another
	# host (the client namespace) with -DENIED and closes, whatever its limit.
	redis) in_srv "$dir" "$exe" --port "$port" --save "" --appendonly no --dir "$dir" \
		${lim:+--maxclients "$lim" --protected-mode no} ;;
	memcached) in_srv "$dir" "$exe" -u nobody -p "$port" ${lim:+-c "$lim"} ;;
	haproxy)
		# Past a limit, a client timeout longer than the lab's connects and hold: at 5 s
		# HAProxy answered idle connections 408 before the hold ended.
		printf '%s\n' "global" "  pidfile $dir/haproxy.pid" ${lim:+"  maxconn $lim"} "defaults" "  mode http" \
			"  timeout client $([[ -n $lim ]] && echo 60 || echo 5)s" "  timeout connect 5s" "  timeout server 5s" "frontend web" "  bind :$port" \
			"  http-request return status 200" >"$dir/haproxy.cfg"
		in_srv "$dir" "$exe" -f "$dir/haproxy.cfg" ;;
	apache)
		mkdir -p "$dir/logs"
		printf '%s\n' "ServerRoot /etc/apache2" "ServerName runtimes.lab" "Listen $port" \
			"LoadModule mpm_event_module /usr/lib/apache2/modules/mod_mpm_event.so" \
			"LoadModule authz_core_module /usr/lib/apache2/modules/mod_authz_core.so" \
			"PidFile $dir/apache2.pid" "ErrorLog $dir/logs/error.log" "DocumentRoot $dir" \
			"User www-data" "Group www-data" >"$dir/apache2.conf"
		# One child of $lim threads, at most $lim requests at a time.
		[[ -z $lim ]] || printf '%s\n' "ServerLimit 1" "StartServers 1" "ThreadLimit $lim" "ThreadsPerChild $lim" \
			"MaxRequestWorkers $lim" "MinSpareThreads 1" "MaxSpareThreads $lim" >>"$dir/apache2.conf"
		in_srv "$dir" "$exe" -f "$dir/apache2.conf" -DFOREGROUND ;;
	postgresql)
		# PostgreSQL refuses to run as root; its data folder must be its own. Its one
		# non-default setting: listen_addresses (default localhost) so that it listens
		# like the others; its backlog does not depend on it.
		chmod 755 "$work"
		chown postgres: "$dir"
		runuser -u postgres -- "$(dirname "$exe")/initdb" -D "$dir/data" >"$dir/initdb.out" 2>&1 || return 1
		in_srv "$dir" runuser -u postgres -- "$exe" -D "$dir/data" -p "$port" -c "listen_addresses=*" \
			-c "unix_socket_directories=$dir" ${lim:+-c "max_connections=$lim"} ;;
	esac
}

# Run a server in the server namespace from DIR, output in DIR/out; prints its pid.
in_srv() {
	local dir=$1
	shift
	(cd "$dir" && exec ip netns exec "$SRV_NS" "$@") >"$dir/out" 2>&1 </dev/null &
	echo $!
}

# The connection limit RUNTIME_LIMITS gives NAME, or nothing (it has no knob of its own).
runtime_limit() {
	local entry
	for entry in "${RUNTIME_LIMITS[@]}"; do
		if [[ ${entry%%:*} == "$1" ]]; then echo "${entry##*:}"; fi
	done
	return 0
}

# NAME's own knob set to LIMIT, as its configuration spells it.
runtime_limit_knob() {
	case $1 in
	nginx) echo "worker_connections $2" ;;
	redis) echo "--maxclients $2 (--protected-mode no)" ;;
	memcached) echo "-c $2" ;;
	haproxy) echo "maxconn $2" ;;
	apache) echo "MaxRequestWorkers $2" ;;
	postgresql) echo "max_connections=$2" ;;
	esac
}

# The processes holding the listener on PORT in the server namespace (ss -p).
listener_pids() {
	ip netns exec "$SRV_NS" ss -ltnpH "sport = :$1" | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -un
}

# CPU seconds (user + system, every thread) the processes PIDS have used so far.
cpu_seconds() {
	local pid ticks=0 hz
	hz=$(getconf CLK_TCK)
	for pid in "$@"; do
		ticks=$((ticks + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)))
	done
	awk -v t="$ticks" -v hz="$hz" 'BEGIN {printf "%.2f", t / hz}'
}

# NAME (listening on PORT) past its own connection limit: 40 idle connections from the
# client namespace held 3 s; what it did, in DIR/at_limit.json.
hold_past_limit() {
	local name=$1 port=$2 dir=$3 lim knob pids before after held n
	if [[ " ${RUNTIMES_CLOSE_AT_ONCE[*]} " == *" $name "* ]]; then
		printf '{"skipped": "%s"}\n' "the lab's server answers and closes each connection without reading: it never holds one" \
			>"$dir/at_limit.json"
		return 0
	fi
	mapfile -t pids < <(listener_pids "$port")
	lim=$(runtime_limit "$name")
	if [[ -n $lim ]]; then
		knob=$(runtime_limit_knob "$name" "$lim")
	else
		# No limit of its own: its open files are the limit it meets.
		n=$(find "/proc/${pids[0]}/fd" -mindepth 1 -maxdepth 1 | wc -l)
		lim=$((n + RUNTIME_FD_HEADROOM))
		prlimit --pid "${pids[0]}" --nofile="$lim:$lim"
		knob="open files $lim ($n in use + $RUNTIME_FD_HEADROOM, prlimit)"
	fi
	before=$(cpu_seconds "${pids[@]}")
	held=$(ip netns exec "$CLI_NS" python3 "$PACK_ROOT/labs/runtimes/hold_idle.py" "$SRV_IP" "$port" --conns 40 --hold 3)
	after=$(cpu_seconds "${pids[@]}")
	printf '{"knob": %s, "limit": %d, "pids": [%s], "cpu_s": %s, "hold": %s}\n' "$(json_str "$knob")" "$lim" \
		"$(IFS=,; echo "${pids[*]}")" "$(awk -v a="$after" -v b="$before" 'BEGIN {printf "%.2f", a - b}')" "$held" \
		>"$dir/at_limit.json"
	log "$name past $knob: $held"
}

# NAME started and waited for until it listens on PORT (or found not to): its
# runtimes.tsv row; in the limits variant it is then held past its limit and stopped.
runtime_try() {
	local name=$1 port=$2 exe pid i status
	exe=$(runtime_exe "$name")
	if [[ -z $exe || ! -x $exe ]]; then
		log "$name: not installed"
		printf '%s\t%s\t\tnot installed\t\t\n' "$name" "$port" >>"$work/runtimes.tsv"
		return 0
	fi
	pid=$(runtime_start "$name" "$port" "$exe" "$work/$name") || pid=""
	[[ -z $pid ]] || cleanup_push "stop_process $pid TERM 10"
	status="did not listen"
	for ((i = 0; i < RUNTIME_READY_SECONDS * 10; i++)); do
		if ip netns exec "$SRV_NS" ss -ltnH "sport = :$port" | grep -q LISTEN; then status=listening; break; fi
		if [[ -z $pid ]] || ! kill -0 "$pid" 2>/dev/null; then status="exited"; break; fi
		nap 0.1
	done
	[[ $status == listening ]] || tail -3 "$work/$name/out" >&2 2>/dev/null || true
	log "$name: $status ($(runtime_version "$name" "$exe"))"
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$port" "$pid" "$status" "$(runtime_version "$name" "$exe")" \
		"$exe" >>"$work/runtimes.tsv"
	if [[ $variant == limits && $status == listening ]]; then
		# A sample of it listening first, then its limit; stopped before the next starts.
		nap "$((interval + 1))"
		hold_past_limit "$name" "$port" "$work/$name"
		stop_process "$pid" TERM 10
		nap "$interval"
	fi
}

# Every installed runtime tried (runtime_try), rows in $work/runtimes.tsv: name port
# pid status version exe.
lab_run() {
	local run=$1 work=$2 entry
	printf 'name\tport\tpid\tstatus\tversion\texe\n' >"$work/runtimes.tsv"
	for entry in "${RUNTIMES[@]}"; do
		runtime_try "${entry%%:*}" "${entry##*:}"
	done
	# Two samples with every server up: listeners.csv and processes.csv hold each.
	[[ $variant == limits ]] || nap "$((2 * interval + 1))"
}

lab_json() {
	py_helper "$PACK_ROOT/labs/runtimes/lab_json.py" "$work/runtimes.tsv" \
		variant="$variant" summary="$LAB_SUMMARY" srv_ns="$SRV_NS" srv_inode="$(netns_inode "$SRV_NS")" \
		somaxconn="$(ip netns exec "$SRV_NS" cat /proc/sys/net/core/somaxconn)"
}
