// Command httpserver is a minimal net/http server for the labs. Its only
// knob, -work, burns CPU in every request, so that a server whose request
// processing cannot keep up (a saturated event loop) can be modelled and
// its effect on the kernel's queues observed from outside.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"tcpqueues/labs/internal/labutil"
)

const (
	// readHeaderTimeout stops a client that connects and sends nothing
	// (or trickles its headers) from holding a connection and goroutine
	// forever, which would otherwise skew a lab about connection counts.
	readHeaderTimeout = 10 * time.Second
	// idleTimeout bounds keep-alive connections between requests.
	idleTimeout = 30 * time.Second
	// shutdownGrace is how long exit waits for in-flight requests, so the
	// request count is not cut short, while a stuck client cannot hold up
	// exit indefinitely.
	shutdownGrace = 5 * time.Second
)

type config struct {
	listen    string
	work      time.Duration
	duration  time.Duration
	readyFile string
	statsFile string
	// Idle connections held open by the lab's connhold send no request; the
	// header timeout must outlast the hold or the server drops them.
	headerTimeout time.Duration
}

type stats struct {
	Requests int64 `json:"requests"`
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("httpserver: ")

	cfg, err := parseFlags()
	if err != nil {
		labutil.ExitUsage("httpserver", err)
	}
	if err := run(cfg); err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

func parseFlags() (config, error) {
	var cfg config
	flag.StringVar(&cfg.listen, "listen", "", "`addr:port` to listen on (required), e.g. 127.0.0.1:8080")
	flag.DurationVar(&cfg.work, "work", 0, "busy CPU time spent in every request (a spin loop, not a sleep), to model a saturated server")
	flag.DurationVar(&cfg.duration, "duration", 0, "exit cleanly after this long (0 = run until SIGINT/SIGTERM)")
	flag.StringVar(&cfg.readyFile, "ready-file", "", "after listen succeeds, atomically write the listener address to this `path`")
	flag.StringVar(&cfg.statsFile, "stats", "", "at exit, write JSON stats ({\"requests\": n}) to this `path`")
	flag.DurationVar(&cfg.headerTimeout, "header-timeout", readHeaderTimeout, "how long a connection may stay silent before its request header (and idle between requests)")
	labutil.SetUsage("Usage: httpserver -listen ADDR [flags]\n\n" +
		"Minimal HTTP server: GET / answers \"hello\\n\" after -work of CPU spinning.\n" +
		"Parallelism follows GOMAXPROCS (default: the CPU count); set GOMAXPROCS=1\n" +
		"to model a single-threaded event loop.\n\n")
	flag.Parse()

	switch {
	case flag.NArg() > 0:
		return cfg, fmt.Errorf("unexpected arguments: %q", flag.Args())
	case cfg.listen == "":
		return cfg, errors.New("-listen is required")
	case cfg.work < 0, cfg.duration < 0:
		return cfg, errors.New("durations must be >= 0")
	}
	return cfg, nil
}

func run(cfg config) error {
	ctx, stop := labutil.SignalContext()
	defer stop()

	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	log.Printf("listening on %s work=%s GOMAXPROCS=%d", addr, cfg.work, runtime.GOMAXPROCS(0))

	var requests atomic.Int64
	mux := http.NewServeMux()
	// "/{$}" matches only the root, so stray paths (favicon, scanners) get
	// a 404 and do not inflate the request count or burn -work.
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		spin(cfg.work)
		requests.Add(1)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "hello\n")
	})
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: cfg.headerTimeout,
		IdleTimeout:       max(idleTimeout, cfg.headerTimeout),
		ErrorLog:          log.Default(),
	}

	if err := labutil.WriteReadyFile(cfg.readyFile, addr); err != nil {
		ln.Close()
		return err
	}

	if cfg.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.duration)
		defer cancel()
	}

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	select {
	case err := <-serveErr:
		// Serve only returns early on a listener failure.
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}

	// Shutdown stops accepting, closes idle keep-alive connections and waits
	// for in-flight requests; after the grace period the rest are cut off.
	shCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shCtx); err != nil {
		log.Printf("shutdown: %v; closing remaining connections", err)
		srv.Close()
	}
	<-serveErr // http.ErrServerClosed once Shutdown/Close has run

	st := stats{Requests: requests.Load()}
	log.Printf("exiting: requests=%d", st.Requests)
	return labutil.WriteStatsFile(cfg.statsFile, st)
}

// spin keeps the CPU busy for d instead of sleeping: a sleeping handler
// frees its thread and would model slow I/O, not a server out of CPU.
func spin(d time.Duration) {
	if d <= 0 {
		return
	}
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}
