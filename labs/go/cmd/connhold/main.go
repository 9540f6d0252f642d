// Command connhold opens many TCP connections and keeps them open without
// sending anything, to reproduce what a large population of idle clients
// costs a server: file descriptors, socket memory, a full accept queue when
// the application does not keep up, and (for the client) ephemeral ports.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"tcpqueues/labs/internal/labutil"
)

// fdReserve is the headroom kept above -conns for stdio, the runtime's own
// descriptors (epoll, pipes) and the ready file, so that hitting the limit
// shows up as a clear start-up error rather than EMFILE half-way through.
const fdReserve = 64

type config struct {
	target         string
	conns          int
	hold           time.Duration
	rate           float64
	readyFile      string
	connectTimeout time.Duration
}

func main() {
	cfg, err := parseFlags()
	if err != nil {
		labutil.ExitUsage("connhold", err)
	}
	if err := run(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "connhold: %v\n", err)
		os.Exit(1)
	}
}

func parseFlags() (config, error) {
	var cfg config
	flag.StringVar(&cfg.target, "target", "", "`addr:port` to connect to (required)")
	flag.IntVar(&cfg.conns, "conns", 100, "number of connections to open and hold")
	flag.DurationVar(&cfg.hold, "hold", 10*time.Second, "how long to keep the connections open after the last connect attempt finished")
	flag.Float64Var(&cfg.rate, "rate", 2000, "connections opened per second while ramping up")
	flag.StringVar(&cfg.readyFile, "ready-file", "", "once every connect attempt has finished, atomically write the number connected to this `path`")
	flag.DurationVar(&cfg.connectTimeout, "connect-timeout", 3*time.Second, "dial timeout per connection")
	labutil.SetUsage("Usage: connhold -target ADDR [flags]\n\n" +
		"Opens -conns TCP connections at -rate per second, sends nothing, holds them for\n" +
		"-hold (or until SIGINT/SIGTERM), then closes them all. Failed connections are\n" +
		"counted, not retried. One client IP can hold at most as many connections to one\n" +
		"addr:port as net.ipv4.ip_local_port_range has ports.\n\n")
	flag.Parse()

	switch {
	case flag.NArg() > 0:
		return cfg, fmt.Errorf("unexpected arguments: %q", flag.Args())
	case cfg.target == "":
		return cfg, errors.New("-target is required")
	case cfg.conns <= 0:
		return cfg, errors.New("-conns must be > 0")
	case !(cfg.rate > 0 && !math.IsInf(cfg.rate, 0)):
		return cfg, errors.New("-rate must be > 0")
	case cfg.hold < 0:
		return cfg, errors.New("-hold must be >= 0")
	case cfg.connectTimeout <= 0:
		return cfg, errors.New("-connect-timeout must be > 0")
	}
	if _, _, err := net.SplitHostPort(cfg.target); err != nil {
		return cfg, fmt.Errorf("-target: %w", err)
	}
	return cfg, nil
}

// raiseNofile lifts the soft RLIMIT_NOFILE to the hard limit and checks that
// need descriptors fit. The Go runtime already raises the soft limit at
// start-up on Linux, but doing it here makes the requirement explicit and
// lets an impossible -conns fail before any connection is opened.
func raiseNofile(need int) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("getrlimit RLIMIT_NOFILE: %w", err)
	}
	if uint64(need) > lim.Max {
		return fmt.Errorf("need %d file descriptors (-conns + %d spare) but the hard RLIMIT_NOFILE is %d: "+
			"lower -conns or raise the hard limit (ulimit -Hn, LimitNOFILE=)", need, fdReserve, lim.Max)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return fmt.Errorf("setrlimit RLIMIT_NOFILE to %d: %w", lim.Max, err)
		}
	}
	return nil
}

// tally counts failed connects by reason, so a run that fails shows why
// (timeouts from a full accept queue vs. EADDRNOTAVAIL from port exhaustion).
type tally struct {
	mu     sync.Mutex
	counts map[string]int
}

func (t *tally) add(reason string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts == nil {
		t.counts = map[string]int{}
	}
	t.counts[reason]++
}

func (t *tally) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]string, 0, len(t.counts))
	for k := range t.counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.Itoa(t.counts[k])
	}
	return strings.Join(parts, " ")
}

func run(cfg config) error {
	if err := raiseNofile(cfg.conns + fdReserve); err != nil {
		return err
	}

	// SIGINT/SIGTERM cut both the ramp-up and the hold short; the
	// connections are still closed in an orderly way and the tally printed.
	ctx, stop := labutil.SignalContext()
	defer stop()

	// KeepAlive < 0 turns off the TCP keepalive the Go dialer enables by
	// default (first probe after 15 s idle): the connections are meant to be
	// truly idle, so that nothing but the client's own close ends them.
	dialer := &net.Dialer{Timeout: cfg.connectTimeout, KeepAlive: -1}

	conns := make([]net.Conn, cfg.conns) // one slot per attempt: no locking
	var connected, failed atomic.Int64
	var reasons tally
	var wg sync.WaitGroup

	progressDone := make(chan struct{})
	progressStopped := make(chan struct{})
	go func() {
		defer close(progressStopped)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-progressDone:
				return
			case <-tick.C:
				fmt.Fprintf(os.Stderr, "connhold: connected=%d failed=%d of %d\n", connected.Load(), failed.Load(), cfg.conns)
			}
		}
	}()

	// Start offsets come from t0, not from the previous start, so slow dials
	// (SYN retransmits against a full accept queue) never slow the ramp:
	// the rate is what the server is offered, as with a real client fleet.
	t0 := time.Now()
	started := 0
ramp:
	for ; started < cfg.conns; started++ {
		if wait := time.Until(t0.Add(time.Duration(float64(started) / cfg.rate * float64(time.Second)))); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				break ramp
			}
		} else if ctx.Err() != nil {
			break
		}
		slot := &conns[started]
		wg.Go(func() {
			c, err := dialer.DialContext(ctx, "tcp", cfg.target)
			if err != nil {
				failed.Add(1)
				reasons.add(failReason(ctx, err))
				return
			}
			*slot = c
			connected.Add(1)
		})
	}
	wg.Wait()
	close(progressDone)
	<-progressStopped

	held := connected.Load()
	fmt.Fprintf(os.Stderr, "connhold: connected=%d failed=%d of %d in %s\n",
		held, failed.Load(), cfg.conns, time.Since(t0).Round(time.Millisecond))
	if started < cfg.conns {
		fmt.Fprintf(os.Stderr, "connhold: interrupted after starting %d/%d\n", started, cfg.conns)
	}

	if ctx.Err() == nil {
		// Written even when some attempts failed: a driver waits on this
		// file, and the count it contains tells it how many are really held.
		if err := labutil.WriteReadyFile(cfg.readyFile, strconv.FormatInt(held, 10)); err != nil {
			closeAll(conns)
			return err
		}
		fmt.Fprintf(os.Stderr, "connhold: holding %d connections for %s\n", held, cfg.hold)
		t := time.NewTimer(cfg.hold)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			fmt.Fprintf(os.Stderr, "connhold: signalled, releasing early\n")
		}
	}

	// A server may drop idle connections on its own (aqserver does after its
	// 10 s read timeout); "held" would then overstate what the server still
	// carries, so say how many were already closed from the other side.
	open, peerClosed := 0, 0
	for _, c := range conns {
		if c == nil {
			continue
		}
		if isPeerClosed(c) {
			peerClosed++
		} else {
			open++
		}
	}
	fmt.Fprintf(os.Stderr, "connhold: at release open=%d peer_closed=%d\n", open, peerClosed)
	closeAll(conns)
	if f := failed.Load(); f > 0 {
		fmt.Fprintf(os.Stderr, "connhold: failures: %s\n", reasons.String())
	}
	fmt.Fprintf(os.Stderr, "connhold: held=%d failed=%d\n", held, failed.Load())
	return nil
}

// failReason names a failed dial by errno where there is one, because that
// is what distinguishes the lab's failure modes.
func failReason(ctx context.Context, err error) string {
	var errno syscall.Errno
	switch {
	case ctx.Err() != nil:
		return "interrupted"
	case errors.As(err, &errno):
		return errnoName(errno)
	case labutil.IsTimeout(err):
		return "timeout"
	default:
		return "other"
	}
}

var errnoNames = map[syscall.Errno]string{
	syscall.EADDRINUSE:    "EADDRINUSE",
	syscall.EADDRNOTAVAIL: "EADDRNOTAVAIL",
	syscall.ECONNREFUSED:  "ECONNREFUSED",
	syscall.ECONNRESET:    "ECONNRESET",
	syscall.EHOSTUNREACH:  "EHOSTUNREACH",
	syscall.EMFILE:        "EMFILE",
	syscall.ENETUNREACH:   "ENETUNREACH",
	syscall.ENFILE:        "ENFILE",
	syscall.ENOBUFS:       "ENOBUFS",
	syscall.ETIMEDOUT:     "ETIMEDOUT",
}

func errnoName(errno syscall.Errno) string {
	if name, ok := errnoNames[errno]; ok {
		return name
	}
	return "errno_" + strconv.Itoa(int(errno))
}

// isPeerClosed peeks without blocking and without consuming anything: a
// zero-byte read means the peer's FIN arrived, an error other than EAGAIN
// means the connection was reset. Data waiting (n > 0) or EAGAIN means the
// connection is still up.
func isPeerClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	ctlErr := rc.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == nil:
			closed = n == 0
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EINTR):
			closed = false
		default:
			closed = true
		}
	})
	return closed || ctlErr != nil
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
}
