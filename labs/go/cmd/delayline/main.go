// Command delayline is a network path with a delay, for kernels without
// netem: it forwards every frame between two interfaces of its namespace
// (the two veth ends of a lab's path namespace, taken off their bridge), each
// direction holding frames for -delay after a link of -rate bits per second
// has serialised them, with a queue of -queue frames (a full queue drops, as
// a router's does). The delay is the path's: RTT = 2 x -delay plus what the
// queue adds. Frames carry their virtio-net header (PACKET_VNET_HDR), so a
// veth's unfinished checksums and GSO frames pass through unchanged.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"tcpqueues/labs/internal/labutil"
)

const (
	ethPAll         = 0x0003
	packetVnetHdr   = 15 // PACKET_VNET_HDR
	packetIgnoreOut = 23 // PACKET_IGNORE_OUTGOING
	maxFrame        = 65536 + 10
	// A frame due within this much is sent at once: sleeping for less costs more than it keeps.
	sendSlack = 50 * time.Microsecond
)

type config struct {
	a, b      string
	delay     time.Duration
	rate      float64
	queue     int
	readyFile string
	statsFile string
}

type dirStats struct {
	From       string `json:"from"`
	To         string `json:"to"`
	Frames     int64  `json:"frames"`
	Bytes      int64  `json:"bytes"`
	Dropped    int64  `json:"dropped"`
	MaxQueue   int64  `json:"max_queue"`
	LateMaxNs  int64  `json:"late_max_ns"` // the latest a frame left after its due time
	SendErrors int64  `json:"send_errors"`
}

type stats struct {
	DelayMs    float64     `json:"delay_ms"`
	RateBps    float64     `json:"rate_bits_per_s"`
	Queue      int         `json:"queue_frames"`
	Directions []*dirStats `json:"directions"`
}

type frame struct {
	data []byte
	due  time.Time
}

func main() {
	var cfg config
	flag.StringVar(&cfg.a, "a", "", "one interface (required)")
	flag.StringVar(&cfg.b, "b", "", "the other interface (required)")
	flag.DurationVar(&cfg.delay, "delay", 20*time.Millisecond, "one-way delay, each direction")
	flag.Float64Var(&cfg.rate, "rate", 100e6, "link rate, bits per second, each direction (0: no limit)")
	flag.IntVar(&cfg.queue, "queue", 1000, "frames queued per direction at most (more are dropped)")
	flag.StringVar(&cfg.readyFile, "ready-file", "", "write \"ready\" to this `path` once forwarding")
	flag.StringVar(&cfg.statsFile, "stats", "", "write each direction's counts to this JSON `path` at exit")
	labutil.SetUsage("Usage: delayline -a IFACE -b IFACE [flags]\n\n" +
		"Forwards every frame between two interfaces of this network namespace, each\n" +
		"direction through a -rate link, a -queue frame queue and a -delay wait.\n\n")
	flag.Parse()
	if cfg.a == "" || cfg.b == "" || flag.NArg() > 0 || cfg.delay < 0 || cfg.rate < 0 || cfg.queue <= 0 {
		labutil.ExitUsage("delayline", errors.New("-a and -b are required; -delay, -rate >= 0, -queue > 0"))
	}
	ctx, stop := labutil.SignalContext()
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "delayline: %v\n", err)
		os.Exit(1)
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// open is a raw packet socket on one interface, with virtio-net headers, that
// does not see the frames it sends itself.
func open(name string) (int, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return -1, err
	}
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, int(htons(ethPAll)))
	if err != nil {
		return -1, fmt.Errorf("packet socket: %w", err)
	}
	for _, opt := range []int{packetVnetHdr, packetIgnoreOut} {
		if err := syscall.SetsockoptInt(fd, syscall.SOL_PACKET, opt, 1); err != nil {
			syscall.Close(fd)
			return -1, fmt.Errorf("%s: setsockopt %d: %w", name, opt, err)
		}
	}
	// Reads wake up now and then to see whether to stop: closing a socket does not end a
	// read already blocked on it.
	tv := syscall.NsecToTimeval(int64(200 * time.Millisecond))
	if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		syscall.Close(fd)
		return -1, fmt.Errorf("%s: SO_RCVTIMEO: %w", name, err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrLinklayer{Protocol: htons(ethPAll), Ifindex: ifi.Index}); err != nil {
		syscall.Close(fd)
		return -1, fmt.Errorf("%s: bind: %w", name, err)
	}
	return fd, nil
}

func run(ctx context.Context, cfg config) error {
	fa, err := open(cfg.a)
	if err != nil {
		return err
	}
	fb, err := open(cfg.b)
	if err != nil {
		return err
	}
	st := &stats{DelayMs: float64(cfg.delay) / 1e6, RateBps: cfg.rate, Queue: cfg.queue,
		Directions: []*dirStats{{From: cfg.a, To: cfg.b}, {From: cfg.b, To: cfg.a}}}
	var wg sync.WaitGroup
	wg.Go(func() { forward(ctx, cfg, fa, fb, st.Directions[0]) })
	wg.Go(func() { forward(ctx, cfg, fb, fa, st.Directions[1]) })
	if err := labutil.WriteReadyFile(cfg.readyFile, "ready"); err != nil {
		return err
	}
	<-ctx.Done()
	wg.Wait()
	syscall.Close(fa)
	syscall.Close(fb)
	return labutil.WriteStatsFile(cfg.statsFile, st)
}

// forward reads frames from in and writes them to out, each at its due time:
// when the link has serialised it (after the frames before it) plus the delay.
func forward(ctx context.Context, cfg config, in, out int, st *dirStats) {
	q := make(chan frame, cfg.queue)
	var queued atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for f := range q {
			queued.Add(-1)
			if d := time.Until(f.due); d > sendSlack {
				time.Sleep(d)
			} else if late := -d; late > time.Duration(st.LateMaxNs) {
				st.LateMaxNs = int64(late)
			}
			if _, err := syscall.Write(out, f.data); err != nil {
				st.SendErrors++
			}
		}
	}()
	var linkFree time.Time
	buf := make([]byte, maxFrame)
	for ctx.Err() == nil {
		n, _, err := syscall.Recvfrom(in, buf, 0)
		if err != nil {
			if err == syscall.EINTR || err == syscall.EAGAIN {
				continue
			}
			break
		}
		now := time.Now()
		depart := now
		if cfg.rate > 0 {
			if linkFree.After(depart) {
				depart = linkFree
			}
			// The frame's bits on the wire (its virtio-net header is not).
			depart = depart.Add(time.Duration(float64((n-10)*8) / cfg.rate * float64(time.Second)))
		}
		select {
		case q <- frame{data: append([]byte(nil), buf[:n]...), due: depart.Add(cfg.delay)}:
			linkFree = depart
			st.Frames++
			st.Bytes += int64(n - 10)
			if c := queued.Add(1); c > st.MaxQueue {
				st.MaxQueue = c
			}
		default:
			st.Dropped++
		}
	}
	close(q)
	<-done
}
