# sample-netns.awk: the parsers of collector/sample-netns. Kernel counters and ss tables in,
#   the rows of counters.csv, listeners.csv, tw_sockets.csv and sock_buffers.csv out
#   (columns: analysis/contract/sampled_tables.py). One program for all of them, so that a
#   sample of the capture is one awk process whatever it reads: a process start costs a
#   sample more than its parsing (docs/cost.md, "Probes against samplers").
# Run with LC_ALL=C awk -v job=JOB [-v NAME=VALUE ...] -f collector/sample-netns.awk; it reads
#   only the files it is given (/dev/stdin for a pipe). An output named "" is stdout.
#   job=serve      the jobs below one after another, for the life of a sampler (an awk start
#                  costs more than a sample's parsing: gawk 7.2 M instructions, mawk 1.5 M):
#                  a request is a line on stdin of NAME=VALUE fields separated by tabs (job=
#                  and the job's variables; stdout=FILE where its output named "" goes, else
#                  awk's stdout), answered once its outputs are written and closed by a line
#                  holding the variable token on stdout. No input may be /dev/stdin there.
#   job=sample     one sample: the counters (targets, prevf, t) to counters_out when targets
#                  is set; listeners_in (owners, watchers) to listeners_out; tw_in to tw_out;
#                  flows_in (statef, flows_t) to flows_out; an input named "" is not read
#   job=counters   the counters (targets, prevf, t)
#   job=listeners  listeners_in (owners, watchers, t, ns)
#   job=holders    listeners_in, an owners table: "INODE PID..." per socket held
#   job=ephemeral  tw_in (by=service or destination, t, ns)
#   job=buffers    flows_in (statef, t, ns)

# Done reading f. Not stdin: mawk 1.3.4 crashes closing "/dev/stdin", and a job reads it once.
function done_with(f) { if (f != "/dev/stdin") close(f) }

# An output named "" is stdout, or where a served request's go (stdout_to): the file it named
# (stdout=), else default_out. A served request's outputs are closed when it is answered, but
# default_out, which is flushed (gawk takes /dev/fd/N for fd N itself, and would close it).
function put(line, out) {
	if (out == "") out = stdout_to
	if (out == "") { print line; return }
	print line >> out
	opened[out] = 1
}

# ss's "addr:port" (IPv6 in brackets, a scope after %) -> parts[1] address, parts[2] port.
function split_ep(ep, parts,   p) {
	p = match(ep, /:[0-9]+$/)
	parts[1] = substr(ep, 1, p - 1); parts[2] = substr(ep, p + 1) + 0
	gsub(/\[|\]/, "", parts[1]); sub(/%.*/, "", parts[1])
}

# --- counters.csv ---
# TcpExt and Tcp counters -> counters.csv rows. targets: "NETNS:DIR ..." (DIR holds
# netstat and snmp, header/value line pairs: "TcpExt: A B ..." then "TcpExt: 1 2 ...";
# /proc/net: this process's namespace, the sampler's). prevf (optional) holds the last
# values: every counter when it is empty, then only those that changed, with their delta.
# A DIR that cannot be read is skipped.
function counter_line(l, ns, t, out,   g, n, names, vals, i, k, v) {
	split(l, vals, " ")
	if (vals[1] != "TcpExt:" && vals[1] != "Tcp:") return
	g = substr(vals[1], 1, length(vals[1]) - 1)
	if (!(g in c_hdr)) { c_hdr[g] = l; return }
	n = split(c_hdr[g], names, " ")
	for (i = 2; i <= n; i++) {
		k = g "." names[i]; v = vals[i]; c_cur[k] = v
		if (!c_have) put(t "," ns "," g "," names[i] "," v ",", out)
		else if (v != c_old[k]) put(t "," ns "," g "," names[i] "," v "," sprintf("%.0f", v - c_old[k]), out)
	}
	delete c_hdr[g]
}
function counter_pairs(f, ns, t, out,   l) {
	split("", c_hdr)
	while ((getline l < f) > 0) counter_line(l, ns, t, out)
	done_with(f)
}
function counters(targets, prevf, t, out,   l, a, n, tg, j, c, ns, dir, k) {
	split("", c_old); split("", c_cur); c_have = 0
	if (prevf != "") {
		while ((getline l < prevf) > 0) { split(l, a, " "); c_old[a[1]] = a[2]; c_have = 1 }
		close(prevf)
	}
	n = split(targets, tg, " ")
	for (j = 1; j <= n; j++) {
		c = index(tg[j], ":"); ns = substr(tg[j], 1, c - 1); dir = substr(tg[j], c + 1)
		counter_pairs(dir "/netstat", ns, t, out); counter_pairs(dir "/snmp", ns, t, out)
	}
	if (prevf != "") {
		for (k in c_cur) print k, c_cur[k] > prevf
		close(prevf)
	}
}

# --- tw_sockets.csv, and the exporter's sockets per destination ---
# ss -tanoH lines of sockets on ephemeral local ports -> rows, grouped by=service
# (tw_sockets.csv: TIME_WAIT sockets per local address, peer address and service port, the
# lower port of the two, with their timers' least and most time left) or by=destination
# (--ephemeral-sockets: per peer address and port, the sockets in any state and those in
# TIME_WAIT). Addresses as the kernel has them, without brackets or scope.
function ephemeral(f, by, t, ns, out,   o, state, l, r, local, svc, left, v, u, k, p, n, tw, lo, hi, dn, dtw) {
	while ((getline < f) > 0) {
		# ss prints the State column only when it lists more than one state.
		o = ($1 ~ /^[0-9]+$/) ? 0 : 1; state = o ? $1 : "TIME-WAIT"
		# A line cut short (a peer without its port) is no socket.
		if (NF < 4 + o || $(3 + o) !~ /:[0-9]+$/ || $(4 + o) !~ /:[0-9]+$/ || state == "LISTEN") continue
		# Per peer as ss prints it, parsed once per peer at the end: parsing each line took 3 µs.
		if (by == "destination") { n[$(4 + o)]++; tw[$(4 + o)] += (state == "TIME-WAIT"); continue }
		if (state != "TIME-WAIT") continue
		split_ep($(3 + o), l); split_ep($(4 + o), r)
		local = l[2] <= r[2]; svc = local ? l[2] : r[2]
		left = -1
		if (match($0, /timewait,[0-9.]+(ms|sec|min)/)) {
			v = substr($0, RSTART + 9, RLENGTH - 9); u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+/, "", v)
			left = (u == "ms") ? v / 1000 : (u == "min") ? v * 60 : v
		}
		k = l[1] "," r[1] "," svc "," local
		n[k]++
		if (left >= 0 && (!(k in lo) || left < lo[k])) lo[k] = left
		if (left > hi[k]) hi[k] = left
	}
	done_with(f)
	if (by == "destination") {
		for (p in n) { split_ep(p, r); k = r[1] "," r[2]; dn[k] += n[p]; dtw[k] += tw[p] }
		for (k in dn) put(ns "," k "," dn[k] "," dtw[k], out)
	} else
		for (k in n) put(t "," ns "," k "," n[k] "," (k in lo ? lo[k] : "") "," (k in hi ? hi[k] : ""), out)
}

# --- sock_buffers.csv ---
# ss -tinmH state established -> sock_buffers.csv rows (time t, netns ns): a flow whose busy
# clock, re-sent or duplicate count moved since the listing in statef ("KEY BUSY/RETRANS/DSACK"
# lines, rewritten here), a flow that statef did not hold (a new one: its clocks count from
# zero), and one holding unread data; with statef empty (the first listing), every flow: the
# baseline the analysis takes the deltas of the capture from.
# The number in what match() last found in s, skip bytes into it; "" when it found nothing.
# Each caller matches a regex literal: gawk compiles a dynamic regex (a string) again whenever
# the string differs from the last one at that place, which made it 7 times slower than mawk
# on a flows table when one function matched ten different strings (docs/cost.md).
function found(s, skip,   v) {
	if (!RSTART) return ""
	v = substr(s, RSTART + skip, RLENGTH - skip)
	sub(/[^0-9.].*$/, "", v)
	return v
}
function mem(k) { return (k in b_sk) ? b_sk[k] : "" }
# ss -i "retrans:N/TOTAL": the segments in flight re-sent now, and since the flow began.
function total_retrans(s) { return match(s, / retrans:[0-9]+\/[0-9]+/) ? substr(s, index(substr(s, RSTART), "/") + RSTART) + 0 : 0 }
function flow_row(head, info, t, ns, out,   f, l, r, n, i, a, busy, key, m, rt, ds, rwnd, sndbuf, rtt, minrtt, wnd, notsent, acked, rcvd) {
	split(head, f, " ")
	if (f[4] !~ /:[0-9]+$/ || f[3] !~ /:[0-9]+$/) return
	split_ep(f[3], l); split_ep(f[4], r)
	key = l[1] "," l[2] "," r[1] "," r[2]
	split("", b_sk)
	if (match(info, /skmem:\([a-z0-9,]*\)/)) {
		n = split(substr(info, RSTART + 7, RLENGTH - 8), a, ",")
		for (i = 1; i <= n; i++) { m = a[i]; sub(/[0-9]+$/, "", m); b_sk[m] = substr(a[i], length(m) + 1) }
	}
	match(info, / busy:[0-9]+ms/); busy = found(info, 6) + 0
	match(info, / dsack_dups:[0-9]+/); ds = found(info, 12) + 0
	rt = total_retrans(info)
	# Listed again when its busy clock or its re-sent or duplicate counts moved: a flow
	# that writes little is busy for microseconds, and its D-SACKs come after its last write.
	b_state[key] = busy "/" rt "/" ds
	if (b_have && (key in b_old) && b_old[key] == b_state[key] && f[1] == 0) return
	match(info, / rwnd_limited:[0-9]+ms/); rwnd = found(info, 14) + 0
	match(info, / sndbuf_limited:[0-9]+ms/); sndbuf = found(info, 16) + 0
	match(info, / rtt:[0-9.]+\//); rtt = found(info, 5)
	match(info, / minrtt:[0-9.]+/); minrtt = found(info, 8)
	match(info, / snd_wnd:[0-9]+/); wnd = found(info, 9)
	match(info, / notsent:[0-9]+/); notsent = found(info, 9) + 0
	match(info, / bytes_acked:[0-9]+/); acked = found(info, 13) + 0
	match(info, / bytes_received:[0-9]+/); rcvd = found(info, 16) + 0
	put(t "," ns "," key "," f[1] "," f[2] "," mem("r") "," mem("rb") "," mem("w") "," mem("tb") "," mem("d") "," \
		busy "," rwnd "," sndbuf "," rtt "," minrtt "," wnd "," notsent "," acked "," rcvd "," rt "," ds, out)
}
function buffers(f, statef, t, ns, out,   l, a, head, k) {
	split("", b_old); split("", b_state); b_have = 0
	while ((getline l < statef) > 0) { split(l, a, " "); b_old[a[1]] = a[2]; b_have = 1 }
	close(statef)
	while ((getline l < f) > 0) {
		if (l ~ /^[0-9]/) head = l
		else if (l ~ /^[ \t]/ && head != "") { flow_row(head, l, t, ns, out); head = "" }
	}
	done_with(f)
	for (k in b_state) print k, b_state[k] > statef
	close(statef)
}

# --- listeners.csv, and the holders of each listener ---
# ss output -> listeners.csv rows (time t, netns ns), or as holders the lines
# "INODE PID..." of an owners table (the distinct pids holding each socket).
# A listener: Recv-Q Send-Q Local:Port Peer:Port [users:(("comm",pid=N,fd=M),...)]
# ino:N sk:... (ss prints no State column for one state; a leading LISTEN is taken
# too), then a line "<TAB> skmem:(r0,rb...,d<N>)": d is the listener's sk_drops,
# the kernel's own count of SYNs and final ACKs it dropped (tcp_listendrop()).
# ss prints comm raw: it may hold commas, quotes, newlines and any byte. So a
# listener's lines end at its skmem line, and only at one that comes after its
# users field is closed: each comm ends at the first '",pid=N,fd=M)', and a line
# inside it (a comm of 15 bytes can hold a whole short line) is neither a
# listener nor its skmem; its inode is the first " ino:N " after the users field
# (a comm comes before it, its cgroup after). comm is written quoted as RFC 4180
# says when it holds , " CR or LF (as collector/probe-to-csv does).
# ss writes a dual-stack wildcard ([::] without IPV6_V6ONLY) as "*": "::" here,
# as the probes name it, with dual_stack 1 (an IPV6_V6ONLY one is "[::]": 0).
# Each row's pid and comm are the first holder's, holders all of them (space
# separated), watchers the holders whose epoll watches it (from the watchers file:
# epoll_watchers), all by socket inode from the owners table (owners), which may be
# older than this sample.
function comm_open(s,   u, rest) {
	if (!(u = index(s, "users:((\""))) return 0
	rest = substr(s, u + 9)
	while (match(rest, /",pid=[0-9]+,fd=[0-9]+\)/)) {
		rest = substr(rest, RSTART + RLENGTH)
		if (substr(rest, 1, 3) != ",(\"") return 0
		rest = substr(rest, 4)
	}
	return 1
}
function inode(s) { return match(s, / ino:[0-9]+ /) ? substr(s, RSTART + 5, RLENGTH - 6) : "" }
# The users field of line: its first comm and pid, every distinct pid (in
# users_pids), and the text after it (users_rest); 0 when it has none.
function users(line,   u, rest, pid, seen) {
	users_comm = ""; users_pid = ""; users_pids = ""
	u = index(line, "users:((\"")
	if (!u) return 0
	rest = substr(line, u + 9)
	while (match(rest, /",pid=[0-9]+,fd=[0-9]+\)/)) {
		pid = substr(rest, RSTART + 6); sub(/,.*/, "", pid)
		if (users_pid == "") { users_comm = substr(rest, 1, RSTART - 1); users_pid = pid }
		if (!(pid in seen)) { seen[pid] = 1; users_pids = users_pids (users_pids == "" ? "" : " ") pid }
		rest = substr(rest, RSTART + RLENGTH)
		if (substr(rest, 1, 3) != ",(\"") break
		rest = substr(rest, 4)
	}
	users_rest = rest
	return 1
}
# One listener's lines: a row of listeners.csv, or (owner) its holders remembered by inode.
function listener(line, owner,   f, local, p, addr, port, pid, comm, u, ds, ino, hold, watch) {
	sub(/^LISTEN +/, "", line)
	if (line !~ /^[0-9]+ +[0-9]+ +[^ ]+:[0-9*]+ /) return
	split(line, f, " ")
	local = f[3]; p = match(local, /:[0-9*]+$/)
	addr = substr(local, 1, p - 1); port = substr(local, p + 1)
	gsub(/\[|\]/, "", addr); sub(/%.*/, "", addr)
	ds = (addr == "*") ? 1 : 0
	if (addr == "*") addr = "::"
	u = users(line)
	pid = users_pid; comm = users_comm; hold = users_pids
	ino = inode(u ? users_rest : line)
	if (owner) {
		if (ino != "" && pid != "") { l_opid[ino] = pid; l_ocomm[ino] = comm; l_oholders[ino] = hold }
		if (l_holders && ino != "" && hold != "") put(ino " " hold, l_out)
		return
	}
	if (pid == "" && ino in l_opid) { pid = l_opid[ino]; comm = l_ocomm[ino]; hold = l_oholders[ino] }
	if (comm ~ /[,"\r\n]/) { gsub(/"/, "\"\"", comm); comm = "\"" comm "\"" }
	watch = (ino in l_owatch) ? l_owatch[ino] : ""
	put(l_t "," l_ns "," addr "," port "," f[1] "," f[2] "," pid "," comm "," l_drops "," ds "," ino "," hold "," watch, l_out)
}
function listener_feed(l, owner) {
	if (l_have && l ~ /^\t skmem:\([a-z0-9,]*\)[ \t]*$/ && !comm_open(l_cur)) {
		l_drops = ""
		if (match(l, /[(,]d[0-9]+/)) l_drops = substr(l, RSTART + 2, RLENGTH - 2)
		listener(l_cur, owner); l_have = 0; return
	}
	l_cur = l_have ? l_cur "\n" l : l; l_have = 1
}
function listener_flush(owner) { if (l_have) { l_drops = ""; listener(l_cur, owner) }; l_have = 0 }
function listeners(f, owners, watchers, holders, t, ns, out,   l, w, n, i, v) {
	split("", l_opid); split("", l_ocomm); split("", l_oholders); split("", l_owatch)
	l_t = t; l_ns = ns; l_out = out; l_holders = holders; l_have = 0
	if (owners != "") {
		while ((getline l < owners) > 0) listener_feed(l, 1)
		listener_flush(1); close(owners)
	}
	if (watchers != "") {
		while ((getline l < watchers) > 0) {
			n = split(l, w, " "); v = ""
			for (i = 2; i <= n; i++) if (w[i] != "-") v = v (v == "" ? "" : " ") w[i]
			l_owatch[w[1]] = (v == "" ? "-" : v)
		}
		close(watchers)
	}
	while ((getline l < f) > 0) listener_feed(l, holders)
	listener_flush(holders); done_with(f)
}

function run_job(job) {
	if (job == "sample") {
		if (targets != "") counters(targets, prevf, t, counters_out)
		if (listeners_in != "") listeners(listeners_in, owners, watchers, 0, t, ns, listeners_out)
		if (tw_in != "") ephemeral(tw_in, "service", t, ns, tw_out)
		if (flows_in != "") buffers(flows_in, statef, flows_t, ns, flows_out)
	} else if (job == "counters") {
		counters(targets, prevf, t, "")
	} else if (job == "listeners") {
		listeners(listeners_in, owners, watchers, 0, t, ns, "")
	} else if (job == "holders") {
		listeners(listeners_in, "", "", 1, "", "", "")
	} else if (job == "ephemeral") {
		ephemeral(tw_in, by, t, ns, "")
	} else if (job == "buffers") {
		buffers(flows_in, statef, t, ns, "")
	} else {
		print "sample-netns.awk: unknown job \"" job "\"" > "/dev/stderr"
		return 2
	}
	return 0
}

# One served request: its variables set (every one of them, so that none is left from the
# request before), its job run, its outputs closed.
function serve(req,   n, f, i, e, v, k) {
	n = split(req, f, "\t")
	for (i = 1; i <= n; i++) if ((e = index(f[i], "=")) > 1) v[substr(f[i], 1, e - 1)] = substr(f[i], e + 1)
	t = v["t"]; ns = v["ns"]; targets = v["targets"]; prevf = v["prevf"]; counters_out = v["counters_out"]
	listeners_in = v["listeners_in"]; owners = v["owners"]; watchers = v["watchers"]; listeners_out = v["listeners_out"]
	tw_in = v["tw_in"]; tw_out = v["tw_out"]; by = v["by"]
	flows_in = v["flows_in"]; flows_t = v["flows_t"]; statef = v["statef"]; flows_out = v["flows_out"]
	stdout_to = (v["stdout"] != "") ? v["stdout"] : default_out
	run_job(v["job"])
	for (k in opened) if (k == default_out) fflush(k); else close(k)
	split("", opened)
	stdout_to = ""
}

BEGIN {
	if (job == "serve") {
		while ((getline req) > 0) {
			serve(req)
			print token
			fflush()
		}
	} else if (run_job(job)) exit 2
}
