// Command bufflow makes bulk TCP flows whose socket buffers can be made the
// bottleneck on purpose: a sink that reads slowly or with a small SO_RCVBUF,
// and a source that writes as fast as it can (or at a set rate), with a small
// SO_SNDBUF if asked. Both count what the socket-buffer lab needs as its own
// ground truth: bytes moved, read and write calls, the writes that found the
// send buffer full (EAGAIN on the non-blocking socket) and the time spent
// waiting for room.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"tcpqueues/labs/internal/labutil"
)

type config struct {
	role      string
	listen    string
	target    string
	cport     int
	conns     int
	rcvbuf    int
	sndbuf    int
	cc        string
	ioSize    int
	readEvery time.Duration
	rate      float64
	duration  time.Duration
	readyFile string
	statsFile string
}

// flowStats is one connection's account, written into the stats file.
type flowStats struct {
	Laddr       string `json:"laddr"`
	Lport       int    `json:"lport"`
	Raddr       string `json:"raddr"`
	Rport       int    `json:"rport"`
	Bytes       int64  `json:"bytes"`
	Calls       int64  `json:"calls"`  // read or write calls that moved bytes
	Eagain      int64  `json:"eagain"` // calls that found no room (writes) or no data (reads)
	WaitNs      int64  `json:"wait_ns"`
	StartUnixNs int64  `json:"start_unix_ns"`
	EndUnixNs   int64  `json:"end_unix_ns"`
	// What the kernel set (getsockopt SO_RCVBUF / SO_SNDBUF: twice the request).
	Rcvbuf int `json:"rcvbuf"`
	Sndbuf int `json:"sndbuf"`
}

type stats struct {
	Role      string       `json:"role"`
	Pid       int          `json:"pid"`
	IoSize    int          `json:"io_size"`
	ReadEvery string       `json:"read_every"`
	Rate      float64      `json:"rate_bytes_per_s"`
	RcvbufReq int          `json:"rcvbuf_requested"`
	SndbufReq int          `json:"sndbuf_requested"`
	Flows     []*flowStats `json:"flows"`
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		labutil.ExitUsage("bufflow", err)
	}
	ctx, stop := labutil.SignalContext()
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "bufflow: %v\n", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (config, error) {
	var cfg config
	fs := flag.CommandLine
	fs.StringVar(&cfg.role, "role", "", "`sink` (accept and read) or `source` (connect and write)")
	fs.StringVar(&cfg.listen, "listen", "", "sink: `addr:port` to listen on")
	fs.StringVar(&cfg.target, "target", "", "source: `addr:port` to connect to")
	fs.IntVar(&cfg.cport, "cport", 0, "source: local port to connect from (0: any)")
	fs.IntVar(&cfg.conns, "conns", 1, "sink: connections to accept and read")
	fs.IntVar(&cfg.rcvbuf, "rcvbuf", 0, "SO_RCVBUF `bytes` set before listen/connect (0: leave autotuning on)")
	fs.IntVar(&cfg.sndbuf, "sndbuf", 0, "SO_SNDBUF `bytes` set before listen/connect (0: leave autotuning on)")
	fs.StringVar(&cfg.cc, "cc", "", "TCP congestion control `name` set on the socket (TCP_CONGESTION; empty: the namespace's)")
	fs.IntVar(&cfg.ioSize, "io-size", 128<<10, "bytes per read or write call")
	fs.DurationVar(&cfg.readEvery, "read-every", 0, "sink: one read per this interval (0: read as fast as data comes)")
	fs.Float64Var(&cfg.rate, "rate", 0, "source: bytes per second (0: as fast as the socket takes them)")
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "source: how long to write; sink: how long to serve at most")
	fs.StringVar(&cfg.readyFile, "ready-file", "", "sink: write the listen address to this `path` once listening")
	fs.StringVar(&cfg.statsFile, "stats", "", "write the per-connection counts to this JSON `path` at exit")
	labutil.SetUsage("Usage: bufflow -role sink -listen ADDR:PORT [flags]\n" +
		"       bufflow -role source -target ADDR:PORT [flags]\n\n" +
		"A bulk flow whose socket buffers can be the bottleneck: the sink reads -io-size\n" +
		"bytes per call (one call per -read-every when set: a slow reader), the source\n" +
		"writes -io-size bytes per call on a non-blocking socket and counts the calls that\n" +
		"found the send buffer full (EAGAIN). Flags may also come from $" + labutil.FlagsEnv + ".\n\n")
	if err := labutil.ParseFlags(fs, args); err != nil {
		return cfg, err
	}
	switch {
	case fs.NArg() > 0:
		return cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	case cfg.role == "sink" && cfg.listen == "":
		return cfg, errors.New("a sink needs -listen")
	case cfg.role == "source" && cfg.target == "":
		return cfg, errors.New("a source needs -target")
	case cfg.role != "sink" && cfg.role != "source":
		return cfg, errors.New("-role is sink or source")
	case cfg.ioSize <= 0 || cfg.conns <= 0 || cfg.duration <= 0:
		return cfg, errors.New("-io-size, -conns and -duration must be > 0")
	case cfg.rcvbuf < 0 || cfg.sndbuf < 0 || cfg.rate < 0 || cfg.readEvery < 0:
		return cfg, errors.New("-rcvbuf, -sndbuf, -rate and -read-every must be >= 0")
	}
	return cfg, nil
}

func run(ctx context.Context, cfg config) error {
	st := &stats{Role: cfg.role, Pid: os.Getpid(), IoSize: cfg.ioSize, ReadEvery: cfg.readEvery.String(),
		Rate: cfg.rate, RcvbufReq: cfg.rcvbuf, SndbufReq: cfg.sndbuf}
	var err error
	if cfg.role == "sink" {
		err = sink(ctx, cfg, st)
	} else {
		err = source(ctx, cfg, st)
	}
	if werr := labutil.WriteStatsFile(cfg.statsFile, st); werr != nil && err == nil {
		err = werr
	}
	return err
}

// setBuffers sets SO_RCVBUF and SO_SNDBUF before listen() or connect(), as an
// application must for them to size the window it offers (and, for SO_RCVBUF,
// to turn off receive autotuning on the socket).
func setBuffers(cfg config) func(string, string, syscall.RawConn) error {
	return func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			if cfg.rcvbuf > 0 {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, cfg.rcvbuf)
			}
			if serr == nil && cfg.sndbuf > 0 {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, cfg.sndbuf)
			}
			if serr == nil && cfg.cc != "" {
				serr = syscall.SetsockoptString(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CONGESTION, cfg.cc)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}
}

func newFlow(c net.Conn) *flowStats {
	l, r := c.LocalAddr().(*net.TCPAddr), c.RemoteAddr().(*net.TCPAddr)
	f := &flowStats{Laddr: l.IP.String(), Lport: l.Port, Raddr: r.IP.String(), Rport: r.Port,
		StartUnixNs: time.Now().UnixNano()}
	if rc, err := c.(*net.TCPConn).SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			f.Rcvbuf, _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF)
			f.Sndbuf, _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF)
		})
	}
	return f
}

func sink(ctx context.Context, cfg config, st *stats) error {
	lc := net.ListenConfig{Control: setBuffers(cfg)}
	ln, err := lc.Listen(ctx, "tcp", cfg.listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	if err := labutil.WriteReadyFile(cfg.readyFile, ln.Addr().String()); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.duration)
	defer cancel()
	go func() { <-ctx.Done(); ln.Close() }()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range cfg.conns {
		c, err := ln.Accept()
		if err != nil {
			break // the deadline or a signal closed the listener
		}
		f := newFlow(c)
		mu.Lock()
		st.Flows = append(st.Flows, f)
		mu.Unlock()
		wg.Go(func() { readLoop(ctx, cfg, c, f, &mu) })
	}
	wg.Wait()
	return nil
}

// readLoop reads until EOF, an error or the end of ctx; with -read-every, one
// read per tick (the slow reader), else as fast as the data comes.
func readLoop(ctx context.Context, cfg config, c net.Conn, f *flowStats, mu *sync.Mutex) {
	defer c.Close()
	go func() { <-ctx.Done(); c.SetReadDeadline(time.Now()) }()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return
	}
	buf := make([]byte, cfg.ioSize)
	next := time.Now()
	for ctx.Err() == nil {
		if cfg.readEvery > 0 {
			next = next.Add(cfg.readEvery)
			if !sleepUntil(ctx, next) {
				break
			}
		}
		var n int
		var rerr error
		var waitFrom time.Time
		err := rc.Read(func(fd uintptr) bool {
			if !waitFrom.IsZero() {
				addWait(mu, f, time.Since(waitFrom))
				waitFrom = time.Time{}
			}
			n, rerr = syscall.Read(int(fd), buf)
			if rerr == syscall.EAGAIN {
				mu.Lock()
				f.Eagain++
				mu.Unlock()
				waitFrom = time.Now()
				return false
			}
			return true
		})
		if err != nil || rerr != nil || n <= 0 {
			break
		}
		mu.Lock()
		f.Bytes += int64(n)
		f.Calls++
		f.EndUnixNs = time.Now().UnixNano()
		mu.Unlock()
	}
}

func source(ctx context.Context, cfg config, st *stats) error {
	d := net.Dialer{Control: setBuffers(cfg), Timeout: 5 * time.Second}
	if cfg.cport > 0 {
		d.LocalAddr = &net.TCPAddr{Port: cfg.cport}
	}
	c, err := d.DialContext(ctx, "tcp", cfg.target)
	if err != nil {
		return err
	}
	defer c.Close()
	f := newFlow(c)
	st.Flows = append(st.Flows, f)
	deadline := time.Now().Add(cfg.duration)
	if err := c.SetWriteDeadline(deadline); err != nil {
		return err
	}
	stopAt, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	go func() { <-stopAt.Done(); c.SetWriteDeadline(time.Now()) }()
	return writeLoop(stopAt, cfg, c, f)
}

// writeLoop writes -io-size bytes per call until the deadline; a call that
// finds the send buffer full returns EAGAIN (counted) and the runtime waits
// for room (timed). With -rate, the writes are paced to that many bytes/s.
func writeLoop(ctx context.Context, cfg config, c net.Conn, f *flowStats) error {
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return err
	}
	buf := make([]byte, cfg.ioSize)
	t0 := time.Now()
	var mu sync.Mutex
	for ctx.Err() == nil {
		if cfg.rate > 0 && !sleepUntil(ctx, t0.Add(time.Duration(float64(f.Bytes)/cfg.rate*float64(time.Second)))) {
			break
		}
		var n int
		var werr error
		var waitFrom time.Time
		err := rc.Write(func(fd uintptr) bool {
			if !waitFrom.IsZero() {
				addWait(&mu, f, time.Since(waitFrom))
				waitFrom = time.Time{}
			}
			n, werr = syscall.Write(int(fd), buf)
			if werr == syscall.EAGAIN {
				f.Eagain++
				waitFrom = time.Now()
				return false
			}
			return true
		})
		if err != nil || werr != nil {
			break // the deadline, a signal, or the peer went away
		}
		f.Bytes += int64(n)
		f.Calls++
		f.EndUnixNs = time.Now().UnixNano()
	}
	return nil
}

func addWait(mu *sync.Mutex, f *flowStats, d time.Duration) {
	mu.Lock()
	f.WaitNs += int64(d)
	mu.Unlock()
}

// sleepUntil waits for t or the end of ctx; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}
