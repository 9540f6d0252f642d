// Command connload opens TCP connections on a fixed schedule and records the
// outcome and timing of every single attempt, so accept-queue overflow shows
// up as individual connect latencies (SYN retransmits at ~1 s, ~3 s, ...)
// rather than being averaged away.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
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

type config struct {
	target         string
	mode           string
	rate           float64
	arrivals       string
	seed           uint64
	burst          int
	burstEvery     time.Duration
	duration       time.Duration
	maxConns       int
	connectTimeout time.Duration
	ioTimeout      time.Duration
	out            string
	source         string
	reqsPerConn    int
	reqInterval    time.Duration
	waitEOF        bool
}

// Result labels written to the CSV; the analysis matches on these strings.
const (
	resOK             = "ok"
	resConnectTimeout = "connect_timeout"
	resConnectRefused = "connect_refused"
	resConnectError   = "connect_error"
	resReset          = "reset"
	resIOTimeout      = "io_timeout"
	resIOError        = "io_error"
)

// resultOrder fixes the order of the summary line so runs diff cleanly.
var resultOrder = []string{resOK, resConnectTimeout, resConnectRefused, resConnectError, resReset, resIOTimeout, resIOError}

type record struct {
	startUnixNs int64
	connectUs   int64
	firstByteUs int64 // -1 when no reply byte was read
	result      string
	errno       string
	requestsOK  int // complete "ok" reply lines read on this connection
}

func main() {
	cfg, err := parseFlags()
	if err != nil {
		labutil.ExitUsage("connload", err)
	}
	if err := run(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "connload: %v\n", err)
		os.Exit(1)
	}
}

func parseFlags() (config, error) {
	var cfg config
	flag.StringVar(&cfg.target, "target", "", "`addr:port` to connect to (required)")
	flag.StringVar(&cfg.mode, "mode", "rate", "`burst|rate`: evenly paced starts, or groups started at once")
	flag.Float64Var(&cfg.rate, "rate", 100, "connections per second (rate mode)")
	flag.StringVar(&cfg.arrivals, "arrivals", "even", "`even|poisson`: rate-mode starts evenly spaced, or a Poisson process with that mean rate (exponential gaps)")
	flag.Uint64Var(&cfg.seed, "seed", 1, "random seed for -arrivals poisson")
	flag.IntVar(&cfg.burst, "burst", 64, "connections started at once (burst mode)")
	flag.DurationVar(&cfg.burstEvery, "burst-every", time.Second, "interval between bursts (burst mode)")
	flag.DurationVar(&cfg.duration, "duration", 5*time.Second, "how long new connections are started")
	flag.IntVar(&cfg.maxConns, "max-conns", 20000, "hard cap on the number of attempts")
	flag.DurationVar(&cfg.connectTimeout, "connect-timeout", 4*time.Second, "dial timeout per attempt")
	flag.DurationVar(&cfg.ioTimeout, "io-timeout", 5*time.Second, "timeout for writing each request and reading its reply")
	flag.StringVar(&cfg.out, "out", "", "CSV output `path` (required)")
	flag.StringVar(&cfg.source, "source", "", "local `IP` to bind before connecting (optional)")
	flag.IntVar(&cfg.reqsPerConn, "reqs-per-conn", 1, "request lines sent one after another on each connection, each waiting for its reply (keep-alive style)")
	flag.DurationVar(&cfg.reqInterval, "req-interval", 0, "pause between consecutive requests on one connection")
	flag.BoolVar(&cfg.waitEOF, "wait-eof", false, "after the last reply, read until the server closes before closing (an HTTP/1.0 client reading to EOF): the server is then always the first to close and keeps the TIME_WAIT; without it the two closes race and some TIME_WAIT lands on the client")
	labutil.SetUsage("Usage: connload -target ADDR -out PATH [flags]\n\n" +
		"Connection load generator. Each attempt dials, then -reqs-per-conn times sends\n" +
		"\"ping\\n\" and reads one reply line, and closes; every attempt becomes one CSV row:\n" +
		"  " + csvHeader + "\n\n")
	flag.Parse()

	switch {
	case flag.NArg() > 0:
		return cfg, fmt.Errorf("unexpected arguments: %q", flag.Args())
	case cfg.target == "":
		return cfg, errors.New("-target is required")
	case cfg.out == "":
		return cfg, errors.New("-out is required")
	case cfg.mode != "rate" && cfg.mode != "burst":
		return cfg, fmt.Errorf("-mode must be burst or rate, not %q", cfg.mode)
	case cfg.arrivals != "even" && cfg.arrivals != "poisson":
		return cfg, fmt.Errorf("-arrivals must be even or poisson, not %q", cfg.arrivals)
	case cfg.mode == "rate" && !(cfg.rate > 0 && !math.IsInf(cfg.rate, 0)):
		return cfg, errors.New("-rate must be > 0")
	case cfg.mode == "burst" && (cfg.burst <= 0 || cfg.burstEvery <= 0):
		return cfg, errors.New("-burst and -burst-every must be > 0")
	case cfg.duration <= 0:
		return cfg, errors.New("-duration must be > 0")
	case cfg.maxConns <= 0:
		return cfg, errors.New("-max-conns must be > 0")
	case cfg.connectTimeout <= 0 || cfg.ioTimeout <= 0:
		return cfg, errors.New("timeouts must be > 0")
	case cfg.reqsPerConn <= 0:
		return cfg, errors.New("-reqs-per-conn must be > 0")
	case cfg.reqInterval < 0:
		return cfg, errors.New("-req-interval must be >= 0")
	}
	if cfg.source != "" && net.ParseIP(cfg.source) == nil {
		return cfg, fmt.Errorf("-source %q is not an IP address", cfg.source)
	}
	return cfg, nil
}

// plan returns the number of attempts and the start offset of attempt i.
// Offsets are computed from t0 rather than accumulated, so scheduling jitter
// or a slow attempt never shifts later starts.
func plan(cfg config) (int, func(i int) time.Duration) {
	var n int
	var offset func(i int) time.Duration
	switch cfg.mode {
	case "burst":
		bursts := int((cfg.duration + cfg.burstEvery - 1) / cfg.burstEvery) // bursts at k*every < duration
		n = bursts * cfg.burst
		offset = func(i int) time.Duration { return time.Duration(i/cfg.burst) * cfg.burstEvery }
	case "rate":
		if cfg.arrivals == "poisson" {
			// Draw the whole schedule up front: exponential gaps summed
			// until the duration is reached, reproducible from the seed.
			rng := rand.New(rand.NewPCG(cfg.seed, 0xa77))
			var at []time.Duration
			for t := rng.ExpFloat64() / cfg.rate; t*float64(time.Second) < float64(cfg.duration) && len(at) < cfg.maxConns; t += rng.ExpFloat64() / cfg.rate {
				at = append(at, time.Duration(t*float64(time.Second)))
			}
			n = len(at)
			offset = func(i int) time.Duration { return at[i] }
			break
		}
		n = int(math.Ceil(cfg.rate * cfg.duration.Seconds()))
		offset = func(i int) time.Duration { return time.Duration(float64(i) / cfg.rate * float64(time.Second)) }
	}
	return min(n, cfg.maxConns), offset
}

func run(cfg config) error {
	// Open the output first so a bad path fails before any load is sent. It
	// gets its name only once complete: a connload killed halfway (a second
	// Ctrl-C) leaves no connects.csv rather than an empty or truncated one.
	tmp := cfg.out
	if labutil.RenameSafe(cfg.out) {
		tmp = cfg.out + ".partial"
		defer os.Remove(tmp)
	}
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer f.Close()

	dialer := &net.Dialer{Timeout: cfg.connectTimeout}
	if cfg.source != "" {
		dialer.LocalAddr = &net.TCPAddr{IP: net.ParseIP(cfg.source)}
	}

	// SIGINT/SIGTERM only stop new starts: in-flight attempts are bounded by
	// the timeouts and their rows are still worth writing.
	ctx, stop := labutil.SignalContext()
	defer stop()

	total, offset := plan(cfg)
	records := make([]record, total)
	var started atomic.Int64
	var wg sync.WaitGroup

	progressDone := make(chan struct{})
	progressStopped := make(chan struct{})
	go func() {
		defer close(progressStopped)
		progress(progressDone, &started, total)
	}()

	t0 := time.Now()
	n := 0
schedule:
	for ; n < total; n++ {
		if wait := time.Until(t0.Add(offset(n))); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				break schedule
			}
		} else if ctx.Err() != nil {
			break
		}
		// Each attempt writes only its own slot, so no locking is needed and
		// rows come out in conn_id order for free. The start time is taken
		// here rather than in the goroutine so that start_unix_ns never
		// decreases with conn_id, even when a burst's goroutines run out of
		// order; goroutine start-up (microseconds) lands in connect_us.
		rec := &records[n]
		start := time.Now()
		wg.Go(func() { attempt(dialer, cfg, start, rec) })
		started.Add(1)
	}
	close(progressDone)
	<-progressStopped
	if n < total {
		fmt.Fprintf(os.Stderr, "connload: interrupted after starting %d/%d\n", n, total)
	}
	wg.Wait()

	records = records[:n]
	if err := writeCSV(f, records); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if tmp != cfg.out {
		if err := os.Rename(tmp, cfg.out); err != nil {
			return err
		}
	}
	fmt.Fprintln(os.Stderr, summary(records))
	return nil
}

func progress(done <-chan struct{}, started *atomic.Int64, total int) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-done:
			fmt.Fprintf(os.Stderr, "connload: %d/%d started\n", started.Load(), total)
			return
		case <-tick.C:
			fmt.Fprintf(os.Stderr, "connload: %d/%d started\n", started.Load(), total)
		}
	}
}

func attempt(dialer *net.Dialer, cfg config, start time.Time, rec *record) {
	rec.startUnixNs = start.UnixNano()
	rec.firstByteUs = -1

	conn, err := dialer.Dial("tcp", cfg.target)
	rec.connectUs = time.Since(start).Microseconds()
	if err != nil {
		rec.result, rec.errno = dialResult(err), errnoName(err)
		return
	}
	// The client closes after its last reply. Whether that makes it the
	// active closer (and the owner of the TIME_WAIT socket) depends on the
	// server: aqserver closes first by default, and only after the client
	// with -wait-close.
	defer conn.Close()

	r := bufio.NewReader(conn)
	for i := range cfg.reqsPerConn {
		if i > 0 && cfg.reqInterval > 0 {
			time.Sleep(cfg.reqInterval)
		}
		// The I/O budget starts after connect, and afresh for each request,
		// so connect delays (the accept-queue symptom), slow replies and the
		// idle gaps of -req-interval are never charged to one another.
		_ = conn.SetDeadline(time.Now().Add(cfg.ioTimeout))
		if _, err := io.WriteString(conn, "ping\n"); err != nil {
			rec.result, rec.errno = ioResult(err), errnoName(err)
			return
		}
		if _, err := r.ReadByte(); err != nil {
			rec.result, rec.errno = ioResult(err), errnoName(err)
			return
		}
		if i == 0 {
			rec.firstByteUs = time.Since(start).Microseconds()
		}
		if _, err := r.ReadString('\n'); err != nil {
			rec.result, rec.errno = ioResult(err), errnoName(err)
			return
		}
		rec.requestsOK++
	}
	if cfg.waitEOF {
		// Within the last request's I/O budget: anything but the server's
		// FIN (more data, a reset, the timeout) fails the attempt.
		if n, err := r.Read(make([]byte, 1)); n > 0 || err != io.EOF {
			if err == nil {
				err = errors.New("data after the last reply")
			}
			rec.result, rec.errno = ioResult(err), errnoName(err)
			return
		}
	}
	// Only a connection on which every request was answered counts as ok;
	// a partial one keeps the error of the request that failed.
	rec.result = resOK
}

// dialResult classifies a failed dial. EADDRNOTAVAIL (no free ephemeral
// port for the destination, typically because the client's own TIME_WAIT
// sockets hold them all) falls into connect_error and is told apart by its
// errno column. With -source the port is bound explicitly first, and the
// same exhaustion is reported by bind(2) as EADDRINUSE instead.
func dialResult(err error) string {
	switch {
	case labutil.IsTimeout(err):
		return resConnectTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return resConnectRefused
	default:
		return resConnectError
	}
}

func ioResult(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return resReset
	case labutil.IsTimeout(err):
		return resIOTimeout
	default:
		return resIOError
	}
}

// errnoNames covers what TCP clients realistically hit; anything else is
// still reported, as errno_N, so no information is lost.
var errnoNames = map[syscall.Errno]string{
	syscall.EACCES:        "EACCES",
	syscall.EADDRINUSE:    "EADDRINUSE",
	syscall.EADDRNOTAVAIL: "EADDRNOTAVAIL",
	syscall.EAGAIN:        "EAGAIN",
	syscall.ECONNABORTED:  "ECONNABORTED",
	syscall.ECONNREFUSED:  "ECONNREFUSED",
	syscall.ECONNRESET:    "ECONNRESET",
	syscall.EHOSTUNREACH:  "EHOSTUNREACH",
	syscall.EINTR:         "EINTR",
	syscall.EINVAL:        "EINVAL",
	syscall.EMFILE:        "EMFILE",
	syscall.ENETDOWN:      "ENETDOWN",
	syscall.ENETUNREACH:   "ENETUNREACH",
	syscall.ENFILE:        "ENFILE",
	syscall.ENOBUFS:       "ENOBUFS",
	syscall.ENOMEM:        "ENOMEM",
	syscall.ENOTCONN:      "ENOTCONN",
	syscall.EPERM:         "EPERM",
	syscall.EPIPE:         "EPIPE",
	syscall.ETIMEDOUT:     "ETIMEDOUT",
}

func errnoName(err error) string {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return ""
	}
	if name, ok := errnoNames[errno]; ok {
		return name
	}
	return "errno_" + strconv.Itoa(int(errno))
}

// csvHeader is the connects.csv contract; new columns only go at the end so
// that positional readers of older runs keep working.
const csvHeader = "start_unix_ns,conn_id,connect_us,first_byte_us,result,errno,requests_ok"

func writeCSV(w io.Writer, records []record) error {
	bw := bufio.NewWriter(w)
	bw.WriteString(csvHeader + "\n")
	var line []byte
	for i, r := range records {
		line = strconv.AppendInt(line[:0], r.startUnixNs, 10)
		line = append(line, ',')
		line = strconv.AppendInt(line, int64(i), 10)
		line = append(line, ',')
		line = strconv.AppendInt(line, r.connectUs, 10)
		line = append(line, ',')
		if r.firstByteUs >= 0 {
			line = strconv.AppendInt(line, r.firstByteUs, 10)
		}
		line = append(line, ',')
		line = append(line, r.result...)
		line = append(line, ',')
		line = append(line, r.errno...)
		line = append(line, ',')
		line = strconv.AppendInt(line, int64(r.requestsOK), 10)
		line = append(line, '\n')
		bw.Write(line)
	}
	return bw.Flush() // bufio.Writer keeps the first write error for Flush
}

// summary reports connect percentiles over attempts whose dial succeeded:
// failed dials mostly sit at the timeout and would hide the retransmit steps.
func summary(records []record) string {
	counts := map[string]int{}
	var connected []int64
	for _, r := range records {
		counts[r.result]++
		if !strings.HasPrefix(r.result, "connect_") {
			connected = append(connected, r.connectUs)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "connload: attempts=%d", len(records))
	for _, res := range resultOrder {
		if c := counts[res]; c > 0 || res == resOK {
			fmt.Fprintf(&b, " %s=%d", res, c)
		}
	}
	slices.Sort(connected)
	fmt.Fprintf(&b, " connect_us(n=%d connected) p50=%d p99=%d",
		len(connected), percentile(connected, 50), percentile(connected, 99))
	return b.String()
}

// percentile uses the nearest-rank method on sorted data; 0 when empty.
func percentile(sorted []int64, p float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}
