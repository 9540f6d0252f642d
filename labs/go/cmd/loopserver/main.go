// Command loopserver is a multi-threaded event-loop server of the kind nginx,
// Envoy or Redis's I/O threads are: N loops, each one OS thread with its own
// epoll instance and its own listening socket, so that one loop can be
// saturated (a hot shard, a slow handler) while the others sit idle. Go's own
// net package cannot model that: its netpoller runs epoll from whichever
// runtime thread is free, so no thread is "the" loop.
//
// Loop i is a goroutine locked to its OS thread, named loop<i> (prctl
// PR_SET_NAME, the comm that /proc and the epoll probe show), listening on
// the base port + i. It answers minimal HTTP/1.1 keep-alive requests (wrk's
// GET): each request that ends with an empty line gets "hello\n" after -work
// of CPU spinning on that loop's thread.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"tcpqueues/labs/internal/labutil"
)

const (
	maxEvents = 64
	// maxRequest caps what a connection may buffer without completing a
	// request; a client that sends more is closed.
	maxRequest = 16 << 10
	// rusageThread is RUSAGE_THREAD (Linux): the calling thread's CPU time.
	rusageThread = 1
	response     = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\nhello\n"
)

type config struct {
	listen    string
	loops     int
	work      []time.Duration
	backlog   int
	duration  time.Duration
	readyFile string
	statsFile string
}

// loopStats is one loop's own account, written at exit.
type loopStats struct {
	Index    int    `json:"index"`
	Tid      int    `json:"tid"`
	Comm     string `json:"comm"`
	Listen   string `json:"listen"`
	Work     string `json:"work"`
	Accepted int64  `json:"accepted"`
	Requests int64  `json:"requests"`
	// WaitCalls and WaitNs: epoll_wait calls and the time spent inside them,
	// measured by the loop itself (the application's view of "blocked").
	WaitCalls int64 `json:"wait_calls"`
	WaitNs    int64 `json:"wait_ns"`
	Events    int64 `json:"events"`
	// CPUNs: the thread's user + system CPU time (getrusage RUSAGE_THREAD).
	CPUNs   int64 `json:"cpu_ns"`
	StartNs int64 `json:"start_unix_ns"`
	EndNs   int64 `json:"end_unix_ns"`
}

type stats struct {
	Pid   int         `json:"pid"`
	Loops []loopStats `json:"loops"`
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("loopserver: ")

	cfg, err := parseFlags()
	if err != nil {
		labutil.ExitUsage("loopserver", err)
	}
	ctx, stop := labutil.SignalContext()
	defer stop()
	if cfg.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.duration)
		defer cancel()
	}
	if err := run(ctx, cfg); err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

func parseFlags() (config, error) {
	var cfg config
	var work string
	flag.StringVar(&cfg.listen, "listen", "", "`addr:port` of loop 0 (required; IPv4 or [IPv6]); loop i listens on port + i (port 0: each loop an ephemeral port)")
	flag.IntVar(&cfg.loops, "loops", 4, "number of event-loop threads")
	flag.StringVar(&work, "work", "0s", "CPU spun per request, per loop: a comma-separated `list` of Go durations, loop 0 first; the last one applies to the remaining loops")
	flag.IntVar(&cfg.backlog, "backlog", 1024, "listen(2) backlog of each loop's socket")
	flag.DurationVar(&cfg.duration, "duration", 0, "exit cleanly after this long (0 = run until SIGINT/SIGTERM)")
	flag.StringVar(&cfg.readyFile, "ready-file", "", "once every loop listens, atomically write their addresses (one line, space-separated) to this `path`")
	flag.StringVar(&cfg.statsFile, "stats", "", "at exit, write JSON stats (per loop: tid, requests, epoll waits, CPU time) to this `path`")
	labutil.SetUsage("Usage: loopserver -listen ADDR [flags]\n\n" +
		"Multi-threaded event-loop server: -loops OS threads named loop0, loop1, ..., each with\n" +
		"its own epoll instance and listening socket (port + i), answering HTTP/1.1 keep-alive\n" +
		"GETs with \"hello\\n\" after spinning -work of CPU. One loop with a heavy -work under\n" +
		"load never blocks in epoll_wait while the others do.\n\n")
	if err := labutil.ParseFlags(flag.CommandLine, os.Args[1:]); err != nil {
		return cfg, err
	}

	switch {
	case flag.NArg() > 0:
		return cfg, fmt.Errorf("unexpected arguments: %q", flag.Args())
	case cfg.listen == "":
		return cfg, errors.New("-listen is required")
	case cfg.loops <= 0:
		return cfg, errors.New("-loops must be > 0")
	case cfg.backlog <= 0:
		return cfg, errors.New("-backlog must be > 0")
	case cfg.duration < 0:
		return cfg, errors.New("-duration must be >= 0")
	}
	var err error
	if cfg.work, err = parseWork(work, cfg.loops); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// parseWork expands "10ms,200us" into one duration per loop: the values in
// order, the last repeated for the loops left.
func parseWork(s string, loops int) ([]time.Duration, error) {
	parts := strings.Split(s, ",")
	if len(parts) > loops {
		return nil, fmt.Errorf("-work has %d values for %d loops", len(parts), loops)
	}
	out := make([]time.Duration, loops)
	for i := range out {
		p := strings.TrimSpace(parts[min(i, len(parts)-1)])
		d, err := time.ParseDuration(p)
		if err != nil {
			return nil, fmt.Errorf("-work: %w", err)
		}
		if d < 0 {
			return nil, fmt.Errorf("-work: %s is negative", p)
		}
		out[i] = d
	}
	return out, nil
}

func run(ctx context.Context, cfg config) error {
	host, portStr, err := net.SplitHostPort(cfg.listen)
	if err != nil {
		return err
	}
	base, err := strconv.Atoi(portStr)
	if err != nil || base < 0 || base+cfg.loops-1 > 65535 {
		return fmt.Errorf("-listen %s: bad port", cfg.listen)
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return fmt.Errorf("-listen %s: not an IP address", cfg.listen)
	}

	loops := make([]*loop, cfg.loops)
	defer func() {
		for _, l := range loops {
			if l != nil {
				l.close()
			}
		}
	}()
	addrs := make([]string, cfg.loops)
	for i := range loops {
		port := base + i
		if base == 0 {
			port = 0
		}
		l, err := newLoop(i, ip, port, cfg.backlog, cfg.work[i])
		if err != nil {
			return err
		}
		loops[i] = l
		addrs[i] = l.stats.Listen
	}

	// Each loop runs on its own locked thread; started names its thread, so
	// the ready file appears only once every thread has its name.
	var wg sync.WaitGroup
	started := make(chan struct{}, cfg.loops)
	errs := make(chan error, cfg.loops)
	for _, l := range loops {
		wg.Go(func() {
			if err := l.run(started); err != nil {
				errs <- err
			}
		})
	}
	for range loops {
		<-started
	}
	log.Printf("%d loops listening on %s, work %v", cfg.loops, strings.Join(addrs, " "), cfg.work)
	if err := labutil.WriteReadyFile(cfg.readyFile, strings.Join(addrs, " ")); err != nil {
		for _, l := range loops {
			l.stop()
		}
		wg.Wait()
		return err
	}

	select {
	case <-ctx.Done():
	case err := <-errs:
		log.Printf("a loop failed: %v", err)
	}
	for _, l := range loops {
		l.stop()
	}
	wg.Wait()
	close(errs)
	var loopErrs []error
	for err := range errs {
		loopErrs = append(loopErrs, err)
	}

	st := stats{Pid: os.Getpid()}
	for _, l := range loops {
		st.Loops = append(st.Loops, l.stats)
		log.Printf("loop %d (tid %d): accepted=%d requests=%d wait_calls=%d cpu=%s", l.stats.Index, l.stats.Tid,
			l.stats.Accepted, l.stats.Requests, l.stats.WaitCalls, time.Duration(l.stats.CPUNs))
	}
	if err := labutil.WriteStatsFile(cfg.statsFile, st); err != nil {
		return err
	}
	return errors.Join(loopErrs...)
}

type conn struct {
	in      []byte
	out     []byte
	wantOut bool // registered for EPOLLOUT: answers are waiting for room
}

// loop is one event loop: a listening socket, an epoll instance and a pipe
// whose read end wakes the loop when it must stop.
type loop struct {
	lfd, epfd  int
	wakeR      int
	wakeW      int
	work       time.Duration
	conns      map[int]*conn
	stats      loopStats
	stopOnce   sync.Once
	closedOnce sync.Once
}

func newLoop(i int, ip net.IP, port, backlog int, work time.Duration) (*loop, error) {
	l := &loop{lfd: -1, epfd: -1, wakeR: -1, wakeW: -1, work: work, conns: map[int]*conn{}}
	l.stats = loopStats{Index: i, Comm: "loop" + strconv.Itoa(i), Work: work.String()}
	fail := func(what string, err error) (*loop, error) {
		l.close()
		return nil, fmt.Errorf("loop %d: %s: %w", i, what, err)
	}
	family, sa, err := labutil.ListenSockaddr(ip, port)
	if err != nil {
		return fail("address", err)
	}
	if l.lfd, err = syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0); err != nil {
		return fail("socket", err)
	}
	if err = syscall.SetsockoptInt(l.lfd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		return fail("setsockopt SO_REUSEADDR", err)
	}
	if err = syscall.Bind(l.lfd, sa); err != nil {
		return fail("bind "+net.JoinHostPort(ip.String(), strconv.Itoa(port)), err)
	}
	if err = syscall.Listen(l.lfd, backlog); err != nil {
		return fail("listen", err)
	}
	got, err := syscall.Getsockname(l.lfd)
	if err != nil {
		return fail("getsockname", err)
	}
	l.stats.Listen = net.JoinHostPort(ip.String(), strconv.Itoa(labutil.SockaddrPort(got)))
	var p [2]int
	if err = syscall.Pipe2(p[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		return fail("pipe", err)
	}
	l.wakeR, l.wakeW = p[0], p[1]
	if l.epfd, err = syscall.EpollCreate1(syscall.EPOLL_CLOEXEC); err != nil {
		return fail("epoll_create1", err)
	}
	for _, fd := range []int{l.lfd, l.wakeR} {
		if err = syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, fd, &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}); err != nil {
			return fail("epoll_ctl", err)
		}
	}
	return l, nil
}

// stop wakes the loop; it returns from run after closing its connections.
func (l *loop) stop() {
	l.stopOnce.Do(func() { _, _ = syscall.Write(l.wakeW, []byte{1}) })
}

func (l *loop) close() {
	l.closedOnce.Do(func() {
		for fd := range l.conns {
			syscall.Close(fd)
		}
		for _, fd := range []int{l.lfd, l.epfd, l.wakeR, l.wakeW} {
			if fd >= 0 {
				syscall.Close(fd)
			}
		}
	})
}

// run is the event loop. It never unlocks its thread: when it returns, the
// runtime ends the thread rather than reuse one named loop<i>.
func (l *loop) run(started chan<- struct{}) error {
	runtime.LockOSThread()
	l.stats.Tid = syscall.Gettid()
	name := append([]byte(l.stats.Comm), 0)
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0)
	started <- struct{}{}
	l.stats.StartNs = time.Now().UnixNano()
	defer func() {
		l.stats.EndNs = time.Now().UnixNano()
		var ru syscall.Rusage
		if syscall.Getrusage(rusageThread, &ru) == nil {
			l.stats.CPUNs = ru.Utime.Nano() + ru.Stime.Nano()
		}
	}()
	if errno != 0 {
		return fmt.Errorf("loop %d: prctl PR_SET_NAME: %w", l.stats.Index, errno)
	}

	events := make([]syscall.EpollEvent, maxEvents)
	buf := make([]byte, 16<<10)
	for {
		t0 := time.Now()
		n, err := syscall.EpollWait(l.epfd, events, -1)
		l.stats.WaitNs += int64(time.Since(t0))
		l.stats.WaitCalls++
		if err != nil {
			if err == syscall.EINTR {
				continue
			}
			return fmt.Errorf("loop %d: epoll_wait: %w", l.stats.Index, err)
		}
		l.stats.Events += int64(n)
		for _, ev := range events[:n] {
			fd := int(ev.Fd)
			switch fd {
			case l.wakeR:
				return nil
			case l.lfd:
				l.accept()
			default:
				l.serve(fd, ev.Events, buf)
			}
		}
	}
}

func (l *loop) accept() {
	for {
		fd, _, err := syscall.Accept4(l.lfd, syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC)
		if err != nil {
			// EAGAIN: the queue is empty. Anything else (EMFILE, a reset
			// before accept) ends this round; level-triggered epoll retries.
			return
		}
		if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, fd, &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}); err != nil {
			syscall.Close(fd)
			continue
		}
		l.conns[fd] = &conn{}
		l.stats.Accepted++
	}
}

func (l *loop) drop(fd int) {
	_ = syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_DEL, fd, nil)
	syscall.Close(fd)
	delete(l.conns, fd)
}

// serve reads what a connection sent, answers every complete request in it
// (each after -work of CPU), and writes the answers; what does not fit in the
// socket now waits for EPOLLOUT.
func (l *loop) serve(fd int, ev uint32, buf []byte) {
	c := l.conns[fd]
	if c == nil {
		l.drop(fd)
		return
	}
	if ev&(syscall.EPOLLIN|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 {
		n, err := syscall.Read(fd, buf)
		if (n == 0 && err == nil) || (err != nil && err != syscall.EAGAIN) {
			l.drop(fd)
			return
		}
		if n > 0 {
			c.in = append(c.in, buf[:n]...)
		}
		for {
			end := bytes.Index(c.in, []byte("\r\n\r\n"))
			if end < 0 {
				break
			}
			c.in = c.in[end+4:]
			spin(l.work)
			l.stats.Requests++
			c.out = append(c.out, response...)
		}
		if len(c.in) > maxRequest {
			l.drop(fd)
			return
		}
	}
	if len(c.out) > 0 {
		n, err := syscall.Write(fd, c.out)
		if err != nil && err != syscall.EAGAIN {
			l.drop(fd)
			return
		}
		if n > 0 {
			c.out = c.out[n:]
		}
	}
	if wantOut := len(c.out) > 0; wantOut != c.wantOut {
		want := uint32(syscall.EPOLLIN)
		if wantOut {
			want |= syscall.EPOLLOUT
		}
		_ = syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_MOD, fd, &syscall.EpollEvent{Events: want, Fd: int32(fd)})
		c.wantOut = wantOut
	}
}

// spin keeps the loop's thread on the CPU for d: a handler that computes,
// not one that sleeps (a sleeping loop would be blocked, not saturated).
func spin(d time.Duration) {
	if d <= 0 {
		return
	}
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}
