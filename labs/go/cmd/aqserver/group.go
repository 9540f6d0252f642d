package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"tcpqueues/labs/internal/labutil"
)

const (
	// maxMembers bounds -reuseport: a lab group, not a fork bomb.
	maxMembers = 64
	// soReuseport is SO_REUSEPORT on Linux (the syscall package does not name it).
	soReuseport = 0xf
	// memberStartTimeout bounds the wait for every member's ready file.
	memberStartTimeout = 10 * time.Second
)

// parseMembers reads -stall-members: distinct member indexes below n (any index
// when n is 0, where the list does not apply).
func parseMembers(list string, n int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		i, err := strconv.Atoi(f)
		if err != nil || i < 0 || (n > 0 && i >= n) {
			return nil, fmt.Errorf("-stall-members: %q is not a member index below %d", f, n)
		}
		out = append(out, i)
	}
	return out, nil
}

// somaxconn is net.core.somaxconn, the backlog net.Listen asks for (4096 if unreadable).
func somaxconn() int {
	b, err := os.ReadFile("/proc/sys/net/core/somaxconn")
	if n, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && n > 0 {
		return n
	}
	return 4096
}

// runGroup starts cfg.reuseport member processes of this command, each listening
// on its own SO_REUSEPORT socket on cfg.listen: one accept queue per member, as
// nginx's `listen ... reuseport` workers have. The kernel hashes each new
// connection to one member, so a member that stops accepting overflows alone
// while the others stay healthy. This process holds no socket: each member's is
// held by that member only. It forwards SIGINT/SIGTERM, and writes the group's
// ready file once every member is ready and its stats (each member's, and their
// sums) once they have exited.
func runGroup(cfg config) error {
	ctx, stop := labutil.SignalContext()
	defer stop()
	work, err := os.MkdirTemp("", "aqserver-group.")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	members := make([]*exec.Cmd, cfg.reuseport)
	for i := range members {
		cmd := exec.Command(exe, memberArgs(cfg, i, work)...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			stopMembers(members[:i])
			return fmt.Errorf("member %d: %w", i, err)
		}
		members[i] = cmd
	}
	exited := make(chan int, len(members))
	for i, cmd := range members {
		go func() { _ = cmd.Wait(); exited <- i }()
	}
	if err := waitReady(ctx, work, len(members), exited); err != nil {
		stopMembers(members)
		return err
	}
	log.Printf("reuseport group of %d members on %s ready", len(members), cfg.listen)
	if err := labutil.WriteReadyFile(cfg.readyFile, cfg.listen); err != nil {
		stopMembers(members)
		return err
	}
	if cfg.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.duration)
		defer cancel()
	}
	select {
	case <-ctx.Done():
	case i := <-exited:
		log.Printf("member %d exited early", i)
	}
	stopMembers(members)
	for range len(members) - len(exited) {
		<-exited
	}
	return labutil.WriteStatsFile(cfg.statsFile, groupStats(cfg, work))
}

// memberArgs is the command line of member i: this one's settings, its own ready
// and stats files, and the stall only where -stall-members names it.
func memberArgs(cfg config, i int, work string) []string {
	stallAt, stallFor := cfg.stallAt, cfg.stallFor
	args := []string{
		"-reuseport-member", strconv.Itoa(i), "-reuseport", strconv.Itoa(cfg.reuseport),
		"-listen", cfg.listen, "-backlog", strconv.Itoa(cfg.backlog),
		"-accept-delay", cfg.acceptDelay.String(), "-accept-delay-dist", cfg.delayDist,
		"-seed", strconv.FormatUint(cfg.seed+uint64(i), 10),
		"-stall-at", stallAt.String(), "-stall-for", stallFor.String(),
		"-stall-members", joinInts(cfg.stallMembers),
		"-ready-file", filepath.Join(work, fmt.Sprintf("member-%d.ready", i)),
		"-stats", filepath.Join(work, fmt.Sprintf("member-%d.json", i)),
	}
	if cfg.waitClose {
		args = append(args, "-wait-close")
	}
	return args
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// waitReady waits until every member has written its ready file; a member that
// exits first, a signal or memberStartTimeout ends the wait with an error.
func waitReady(ctx context.Context, work string, n int, exited <-chan int) error {
	deadline := time.Now().Add(memberStartTimeout)
	for ready := 0; ready < n; {
		ready = 0
		for i := range n {
			if _, err := os.Stat(filepath.Join(work, fmt.Sprintf("member-%d.ready", i))); err == nil {
				ready++
			}
		}
		select {
		case i := <-exited:
			return fmt.Errorf("member %d exited before it was ready", i)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if ready < n && time.Now().After(deadline) {
			return fmt.Errorf("%d of %d members ready after %s", ready, n, memberStartTimeout)
		}
	}
	return nil
}

// stopMembers asks every started member to stop (SIGTERM: each writes its stats).
func stopMembers(members []*exec.Cmd) {
	for _, cmd := range members {
		if cmd != nil && cmd.Process != nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
	}
}

// groupStats reads each member's stats: the group's are their sums, with each
// member's own beside them (its pid names it in the lab's ground truth).
func groupStats(cfg config, work string) stats {
	st := stats{BacklogRequested: cfg.backlog, Listen: cfg.listen, AcceptDelayDist: cfg.delayDist,
		AcceptDelayMs: float64(cfg.acceptDelay) / float64(time.Millisecond), WaitClose: cfg.waitClose,
		Stalls: []stall{}, Members: []stats{}}
	for i := range cfg.reuseport {
		var m stats
		b, err := os.ReadFile(filepath.Join(work, fmt.Sprintf("member-%d.json", i)))
		if err == nil {
			err = json.Unmarshal(b, &m)
		}
		if err != nil {
			log.Printf("member %d: no stats: %v", i, err)
			continue
		}
		st.Accepted += m.Accepted
		st.Handled += m.Handled
		st.Requests += m.Requests
		st.ServiceSeconds += m.ServiceSeconds
		st.Stalls = append(st.Stalls, m.Stalls...)
		st.Members = append(st.Members, m)
	}
	return st
}
