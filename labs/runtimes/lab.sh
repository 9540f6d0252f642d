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

LAB_VARIANTS=(defaults)
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

lab_describe() {
	cat <<TEXT
runtimes variants:
  defaults  start each installed server with its defaults in the server namespace, no load:
            $(printf '%s ' "${RUNTIMES[@]%%:*}")
            (a server not installed is listed as such; make setup installs the Debian ones)
TEXT
}

lab_params() {
	LAB_SUMMARY="each server with its defaults, no load: $(printf '%s ' "${RUNTIMES[@]%%:*}")"
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
	local name=$1 port=$2 exe=$3 dir=$4
	mkdir -p "$dir"
	case $name in
	go-net-http) in_srv "$dir" "$exe" -listen ":$port" ;;
	node-http) in_srv "$dir" "$exe" "$RUNTIMES_DIR/node_http.js" "$port" ;;
	python-asyncio) in_srv "$dir" "$exe" "$RUNTIMES_DIR/asyncio_server.py" "$port" ;;
	python-http-server) in_srv "$dir" "$exe" -m http.server --directory "$dir" "$port" ;;
	java-serversocket) in_srv "$dir" "$exe" "$RUNTIMES_DIR/JavaServerSocket.java" "$port" ;;
	java-nio) in_srv "$dir" "$exe" "$RUNTIMES_DIR/JavaNio.java" "$port" ;;
	nginx)
		mkdir -p "$dir/logs" "$dir/tmp"
		printf '%s\n' "daemon off;" "pid $dir/nginx.pid;" "error_log $dir/logs/error.log;" "events {}" \
			"http { access_log off; client_body_temp_path $dir/tmp/body; proxy_temp_path $dir/tmp/proxy;" \
			"fastcgi_temp_path $dir/tmp/fastcgi; uwsgi_temp_path $dir/tmp/uwsgi; scgi_temp_path $dir/tmp/scgi;" \
			"server { listen $port; return 200 \"ok\\n\"; } }" >"$dir/nginx.conf"
		in_srv "$dir" "$exe" -p "$dir" -c "$dir/nginx.conf" ;;
	redis) in_srv "$dir" "$exe" --port "$port" --save "" --appendonly no --dir "$dir" ;;
	memcached) in_srv "$dir" "$exe" -u nobody -p "$port" ;;
	haproxy)
		printf '%s\n' "global" "  pidfile $dir/haproxy.pid" "defaults" "  mode http" "  timeout client 5s" \
			"  timeout connect 5s" "  timeout server 5s" "frontend web" "  bind :$port" \
			"  http-request return status 200" >"$dir/haproxy.cfg"
		in_srv "$dir" "$exe" -f "$dir/haproxy.cfg" ;;
	apache)
		mkdir -p "$dir/logs"
		printf '%s\n' "ServerRoot /etc/apache2" "ServerName runtimes.lab" "Listen $port" \
			"LoadModule mpm_event_module /usr/lib/apache2/modules/mod_mpm_event.so" \
			"LoadModule authz_core_module /usr/lib/apache2/modules/mod_authz_core.so" \
			"PidFile $dir/apache2.pid" "ErrorLog $dir/logs/error.log" "DocumentRoot $dir" \
			"User www-data" "Group www-data" >"$dir/apache2.conf"
		in_srv "$dir" "$exe" -f "$dir/apache2.conf" -DFOREGROUND ;;
	postgresql)
		# PostgreSQL refuses to run as root; its data folder must be its own. Its one
		# non-default setting: listen_addresses (default localhost) so that it listens
		# like the others; its backlog does not depend on it.
		chmod 755 "$work"
		chown postgres: "$dir"
		runuser -u postgres -- "$(dirname "$exe")/initdb" -D "$dir/data" >"$dir/initdb.out" 2>&1 || return 1
		in_srv "$dir" runuser -u postgres -- "$exe" -D "$dir/data" -p "$port" -c "listen_addresses=*" \
			-c "unix_socket_directories=$dir" ;;
	esac
}

# Run a server in the server namespace from DIR, output in DIR/out; prints its pid.
in_srv() {
	local dir=$1
	shift
	(cd "$dir" && exec ip netns exec "$SRV_NS" "$@") >"$dir/out" 2>&1 </dev/null &
	echo $!
}

# Every installed runtime started, each waited for until it listens on its
# port (or found not to), its row in $work/runtimes.tsv: name port pid status version exe.
lab_run() {
	local run=$1 work=$2 entry name port exe pid i status
	printf 'name\tport\tpid\tstatus\tversion\texe\n' >"$work/runtimes.tsv"
	for entry in "${RUNTIMES[@]}"; do
		name=${entry%%:*} port=${entry##*:}
		exe=$(runtime_exe "$name")
		if [[ -z $exe || ! -x $exe ]]; then
			log "$name: not installed"
			printf '%s\t%s\t\tnot installed\t\t\n' "$name" "$port" >>"$work/runtimes.tsv"
			continue
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
	done
	# Two samples with every server up: listeners.csv and processes.csv hold each.
	nap "$((2 * interval + 1))"
}

lab_json() {
	"$(venv_python)" "$PACK_ROOT/labs/runtimes/lab_json.py" "$work/runtimes.tsv" \
		variant="$variant" summary="$LAB_SUMMARY" srv_ns="$SRV_NS" srv_inode="$(netns_inode "$SRV_NS")" \
		somaxconn="$(ip netns exec "$SRV_NS" cat /proc/sys/net/core/somaxconn)"
}
