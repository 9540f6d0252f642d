// Command aqserver is a deliberately tunable TCP server for reproducing
// accept-queue overflow: the listen backlog, a per-accept delay and a timed
// stall of the accept loop can all be set, so the kernel's accept queue can
// be made to fill up on demand.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"tcpqueues/labs/internal/labutil"
)

const (
	// handlerTimeout bounds every read (and the reply after it) so a silent
	// client can never pin a handler goroutine (and its fd) for the rest of
	// the run; with -wait-close it is the idle limit between requests.
	handlerTimeout = 10 * time.Second
	// maxLine caps what a handler buffers; the lab protocol is short lines.
	maxLine = 4096
	// shutdownGrace is how long exit waits for in-flight handlers, so that
	// "handled" in the stats is not cut short by a reply still being written,
	// while a stuck client cannot hold up exit for the full handlerTimeout.
	shutdownGrace = 2 * time.Second
)

type config struct {
	listen      string
	backlog     int
	acceptDelay time.Duration
	delayDist   string
	seed        uint64
	stallAt     time.Duration
	stallFor    time.Duration
	duration    time.Duration
	readyFile   string
	statsFile   string
	waitClose   bool
	// reuseport > 0: that many member processes, each with its own SO_REUSEPORT
	// socket on -listen (group.go); member >= 0 is one of them.
	reuseport    int
	member       int
	stallMembers []int
}

type stall struct {
	StartUnixNs int64 `json:"start_unix_ns"`
	EndUnixNs   int64 `json:"end_unix_ns"`
}

type stats struct {
	Accepted         int64   `json:"accepted"`
	Handled          int64   `json:"handled"`
	BacklogRequested int     `json:"backlog_requested"`
	Listen           string  `json:"listen"`
	Stalls           []stall `json:"stalls"`
	AcceptDelayMs    float64 `json:"accept_delay_ms"`
	AcceptDelayDist  string  `json:"accept_delay_dist"`
	// ServiceSeconds is the wall-clock time the accept loop spent between an
	// accept() returning a connection and the next accept() call (the delay
	// actually slept plus handing the connection off): the measured service
	// time that the saturation models take as 1/mu.
	ServiceSeconds float64 `json:"service_seconds"`
	WaitClose      bool    `json:"wait_close"`
	Requests       int64   `json:"requests"`
	// A member of a -reuseport group: which one, and its process.
	Member *int `json:"member,omitempty"`
	Pid    int  `json:"pid,omitempty"`
	// A -reuseport group: each member's own stats (the totals above are their sums).
	Members []stats `json:"members,omitempty"`
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("aqserver: ")

	cfg, err := parseFlags()
	if err != nil {
		labutil.ExitUsage("aqserver", err)
	}
	if err := run(cfg); err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

func parseFlags() (config, error) {
	var cfg config
	flag.StringVar(&cfg.listen, "listen", "", "`addr:port` to listen on (required), e.g. 198.18.0.1:8080 or [2001:2::1]:8080")
	flag.IntVar(&cfg.backlog, "backlog", 0, "listen(2) backlog; 0 uses net.Listen, which passes net.core.somaxconn (the kernel also caps any value at somaxconn)")
	flag.DurationVar(&cfg.acceptDelay, "accept-delay", 0, "sleep after each successful accept (models a slow accept path)")
	flag.StringVar(&cfg.delayDist, "accept-delay-dist", "fixed", "`fixed|exp`: every delay is -accept-delay, or drawn from an exponential distribution with that mean (an M/M/1/K server)")
	flag.Uint64Var(&cfg.seed, "seed", 1, "random seed for -accept-delay-dist exp")
	flag.DurationVar(&cfg.stallAt, "stall-at", 0, "time after ready at which the accept loop stops calling accept")
	flag.DurationVar(&cfg.stallFor, "stall-for", 0, "how long the accept loop stalls (0 = never stall)")
	flag.DurationVar(&cfg.duration, "duration", 0, "exit cleanly after this long (0 = run until SIGINT/SIGTERM)")
	flag.StringVar(&cfg.readyFile, "ready-file", "", "after listen succeeds, atomically write the listener address to this `path`")
	flag.StringVar(&cfg.statsFile, "stats", "", "at exit, write JSON stats (counts, stall wall-clock intervals) to this `path`")
	flag.BoolVar(&cfg.waitClose, "wait-close", false, "answer every request line until the client closes, then close (client becomes the active closer and holds TIME_WAIT); default: close right after the first reply")
	flag.IntVar(&cfg.reuseport, "reuseport", 0, "run `N` member processes, each with its own SO_REUSEPORT socket on -listen (a group the kernel hashes new connections over); -stall-* apply to -stall-members only")
	stallMembers := flag.String("stall-members", "0", "with -reuseport: the members (`list` of 0-based indexes, comma separated) that stall")
	flag.IntVar(&cfg.member, "reuseport-member", -1, "(internal) run as member `I` of a -reuseport group")
	labutil.SetUsage("Usage: aqserver -listen ADDR [flags]\n\n" +
		"TCP server with a settable listen backlog and accept behaviour, for\n" +
		"reproducing accept-queue overflow. Each connection: read one line, reply \"ok\\n\", close.\n" +
		"With -wait-close: reply \"ok\\n\" to every line until the client closes, then close.\n\n")
	if err := labutil.ParseFlags(flag.CommandLine, os.Args[1:]); err != nil {
		return cfg, err
	}

	switch {
	case flag.NArg() > 0:
		return cfg, fmt.Errorf("unexpected arguments: %q", flag.Args())
	case cfg.listen == "":
		return cfg, errors.New("-listen is required")
	case cfg.backlog < 0:
		return cfg, errors.New("-backlog must be >= 0")
	case cfg.acceptDelay < 0, cfg.stallAt < 0, cfg.stallFor < 0, cfg.duration < 0:
		return cfg, errors.New("durations must be >= 0")
	case cfg.delayDist != "fixed" && cfg.delayDist != "exp":
		return cfg, fmt.Errorf("-accept-delay-dist must be fixed or exp, not %q", cfg.delayDist)
	case cfg.reuseport < 0 || cfg.reuseport > maxMembers:
		return cfg, fmt.Errorf("-reuseport must be 0..%d", maxMembers)
	}
	members, err := parseMembers(*stallMembers, cfg.reuseport)
	if err != nil {
		return cfg, err
	}
	cfg.stallMembers = members
	return cfg, nil
}

func run(cfg config) error {
	if cfg.reuseport > 0 && cfg.member < 0 {
		return runGroup(cfg)
	}
	ctx, stop := labutil.SignalContext()
	defer stop()

	ln, err := listen(cfg.listen, cfg.backlog, cfg.member >= 0)
	if err != nil {
		return err
	}
	// All stall timing is relative to this instant, because that is when a
	// driver script (waiting on -ready-file) starts generating load.
	ready := time.Now()
	addr := ln.Addr().String()
	log.Printf("listening on %s backlog=%d accept-delay=%s stall-at=%s stall-for=%s wait-close=%t",
		addr, cfg.backlog, cfg.acceptDelay, cfg.stallAt, cfg.stallFor, cfg.waitClose)

	if err := labutil.WriteReadyFile(cfg.readyFile, addr); err != nil {
		ln.Close()
		return err
	}

	if cfg.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.duration)
		defer cancel()
	}

	srv := &server{cfg: cfg, ln: ln, ready: ready}
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		srv.acceptLoop(ctx)
	}()

	<-ctx.Done()
	// Closing the listener is what unblocks Accept; it also makes the kernel
	// reset every connection still waiting in the accept queue.
	ln.Close()
	<-loopDone
	srv.waitHandlers(shutdownGrace)

	st := stats{
		Accepted:         srv.accepted.Load(),
		Handled:          srv.handled.Load(),
		BacklogRequested: cfg.backlog,
		Listen:           addr,
		Stalls:           srv.stalls,
		AcceptDelayMs:    float64(cfg.acceptDelay) / float64(time.Millisecond),
		AcceptDelayDist:  cfg.delayDist,
		ServiceSeconds:   time.Duration(srv.serviceNs.Load()).Seconds(),
		WaitClose:        cfg.waitClose,
		Requests:         srv.requests.Load(),
	}
	if cfg.member >= 0 {
		st.Member, st.Pid = &cfg.member, os.Getpid()
	}
	if st.Stalls == nil {
		// Keep the JSON shape stable ([] rather than null) for the analysis.
		st.Stalls = []stall{}
	}
	log.Printf("exiting: accepted=%d handled=%d requests=%d stalls=%d", st.Accepted, st.Handled, st.Requests, len(st.Stalls))
	return labutil.WriteStatsFile(cfg.statsFile, st)
}

type server struct {
	cfg      config
	ln       net.Listener
	ready    time.Time
	accepted atomic.Int64
	// serviceNs sums the time from each accept() return to the next accept()
	// call; written by the accept loop only, read after it has returned.
	serviceNs atomic.Int64
	handled   atomic.Int64 // connections that got at least one reply
	requests  atomic.Int64 // reply lines written, over all connections
	handlers  sync.WaitGroup
	stalls    []stall // only touched by the accept loop until it has returned
}

// acceptLoop is intentionally single-threaded: the point of the lab is that
// one slow or stalled acceptor lets the kernel queue fill up.
func (s *server) acceptLoop(ctx context.Context) {
	rng := rand.New(rand.NewPCG(s.cfg.seed, 0x5eed))
	stallPending := s.cfg.stallFor > 0 && (s.cfg.member < 0 || slices.Contains(s.cfg.stallMembers, s.cfg.member))
	stallStart := s.ready.Add(s.cfg.stallAt)
	if stallPending {
		// Accept may be blocked when the stall is due (no incoming
		// connections); the deadline makes it return on time so the stall
		// starts exactly at stall-at rather than after the next connection.
		if err := s.setDeadline(stallStart); err != nil {
			log.Printf("cannot set accept deadline, stall may start late: %v", err)
		}
	}

	for {
		if stallPending && !time.Now().Before(stallStart) {
			stallPending = false
			s.stall(ctx)
			_ = s.setDeadline(time.Time{})
			if ctx.Err() != nil {
				return
			}
			continue
		}

		conn, err := s.ln.Accept()
		if err != nil {
			switch {
			case errors.Is(err, net.ErrClosed):
				return
			case errors.Is(err, os.ErrDeadlineExceeded):
				continue // stall is due; handled at the top of the loop
			default:
				// E.g. EMFILE: back off instead of spinning, but keep serving,
				// since transient resource errors are part of what is studied.
				log.Printf("accept: %v", err)
				sleepCtx(ctx, 10*time.Millisecond)
				continue
			}
		}
		served := time.Now()
		s.accepted.Add(1)
		s.handlers.Go(func() { s.handle(conn) })

		delay := s.cfg.acceptDelay
		if s.cfg.delayDist == "exp" {
			delay = time.Duration(rng.ExpFloat64() * float64(delay))
		}
		completed := delay <= 0 || sleepCtx(ctx, delay)
		s.serviceNs.Add(int64(time.Since(served)))
		if !completed {
			return
		}
	}
}

// stall stops calling Accept for stall-for and records the wall-clock
// interval actually spent, which is shorter if shutdown interrupts it.
func (s *server) stall(ctx context.Context) {
	start := time.Now()
	log.Printf("stalling accept loop for %s", s.cfg.stallFor)
	completed := sleepCtx(ctx, s.cfg.stallFor)
	end := time.Now()
	s.stalls = append(s.stalls, stall{StartUnixNs: start.UnixNano(), EndUnixNs: end.UnixNano()})
	if completed {
		log.Printf("accept loop resumed after %s", end.Sub(start).Round(time.Millisecond))
	} else {
		log.Printf("stall cut short by shutdown after %s", end.Sub(start).Round(time.Millisecond))
	}
}

func (s *server) setDeadline(t time.Time) error {
	dl, ok := s.ln.(interface{ SetDeadline(time.Time) error })
	if !ok {
		return fmt.Errorf("listener %T has no SetDeadline", s.ln)
	}
	return dl.SetDeadline(t)
}

// handle answers request lines on one connection. Which side calls close
// first decides which host keeps the TIME_WAIT socket, and that is what
// -wait-close selects: by default the server closes right after the first
// reply (server-side TIME_WAIT, on the listening port); with -wait-close it
// keeps answering until it reads the client's FIN, so the client closed
// first and the TIME_WAIT lands on the client's ephemeral port.
func (s *server) handle(conn net.Conn) {
	defer conn.Close()
	r := bufio.NewReaderSize(conn, maxLine)
	replied := false
	for {
		// A fresh deadline per request, so a long-lived keep-alive client is
		// only cut off when it goes idle, not after a fixed total time.
		_ = conn.SetDeadline(time.Now().Add(handlerTimeout))
		// The request content is irrelevant; waiting for the line just makes
		// the reply follow the client's request like a real protocol. EOF
		// (the client closed), a timeout or an over-long line ends the
		// connection without a reply.
		if _, err := r.ReadSlice('\n'); err != nil {
			return
		}
		if _, err := conn.Write([]byte("ok\n")); err != nil {
			return
		}
		s.requests.Add(1)
		if !replied {
			replied = true
			s.handled.Add(1)
		}
		if !s.cfg.waitClose {
			return
		}
	}
}

func (s *server) waitHandlers(grace time.Duration) {
	done := make(chan struct{})
	go func() {
		s.handlers.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(grace):
		log.Printf("gave up waiting for in-flight handlers after %s", grace)
	}
}

// listen creates the listener. With backlog > 0 it bypasses net.Listen,
// because Go always passes net.core.somaxconn to listen(2) and offers no
// way to choose the backlog, which is the very knob this lab turns. With
// reuseport the socket joins the SO_REUSEPORT group on addr.
func listen(addr string, backlog int, reuseport bool) (net.Listener, error) {
	if backlog == 0 && !reuseport {
		return net.Listen("tcp", addr)
	}
	if backlog == 0 {
		backlog = somaxconn()
	}

	tcpAddr, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, err
	}
	family, sa, err := labutil.ListenSockaddr(tcpAddr.IP, tcpAddr.Port)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", addr, err)
	}

	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	// Match net.Listen so quick restarts between lab runs do not fail on
	// sockets left in TIME_WAIT.
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("setsockopt SO_REUSEADDR: %w", err)
	}
	if reuseport {
		if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, soReuseport, 1); err != nil {
			syscall.Close(fd)
			return nil, fmt.Errorf("setsockopt SO_REUSEPORT: %w", err)
		}
	}
	if err := syscall.Bind(fd, sa); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("bind %s: %w", addr, err)
	}
	if err := syscall.Listen(fd, backlog); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("listen: %w", err)
	}

	f := os.NewFile(uintptr(fd), "aqserver-listener")
	// FileListener dups the descriptor, so the original must be closed either
	// way to avoid leaking it.
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("file listener: %w", err)
	}
	return ln, nil
}

// sleepCtx sleeps for d and reports whether it ran to completion, so that
// long delays and stalls never hold up a requested shutdown.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
