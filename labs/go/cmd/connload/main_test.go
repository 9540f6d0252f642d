package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The attempt count is part of the lab's contract (the analysis compares it
// with server-side counters), so pin down the edge cases of the bound.
func TestPlan(t *testing.T) {
	tests := []struct {
		cfg  config
		n    int
		last time.Duration
	}{
		{config{mode: "rate", rate: 100, duration: 5 * time.Second, maxConns: 20000}, 500, 4990 * time.Millisecond},
		{config{mode: "rate", rate: 3, duration: 1500 * time.Millisecond, maxConns: 20000}, 5, 1333333333},
		{config{mode: "burst", burst: 30, burstEvery: time.Second, duration: 2 * time.Second, maxConns: 20000}, 60, time.Second},
		{config{mode: "burst", burst: 10, burstEvery: time.Second, duration: 2001 * time.Millisecond, maxConns: 20000}, 30, 2 * time.Second},
		{config{mode: "burst", burst: 64, burstEvery: time.Second, duration: time.Millisecond, maxConns: 20000}, 64, 0},
		{config{mode: "rate", rate: 1000, duration: time.Minute, maxConns: 20000}, 20000, 19999 * time.Millisecond},
	}
	for _, tt := range tests {
		n, offset := plan(tt.cfg)
		if n != tt.n {
			t.Errorf("%+v: n = %d, want %d", tt.cfg, n, tt.n)
			continue
		}
		if got := offset(n - 1); got != tt.last {
			t.Errorf("%+v: last offset = %s, want %s", tt.cfg, got, tt.last)
		}
	}
}

// Poisson starts: increasing offsets inside the duration, a mean rate close to
// the one asked for, gaps with the exponential's coefficient of variation
// (1; even spacing would give 0), and the same schedule for the same seed.
func TestPlanPoisson(t *testing.T) {
	cfg := config{mode: "rate", arrivals: "poisson", rate: 500, duration: 20 * time.Second, maxConns: 20000, seed: 7}
	n, offset := plan(cfg)
	if n < 9500 || n > 10500 {
		t.Fatalf("n = %d, want about 10000", n)
	}
	var sum, sumSq float64
	prev := time.Duration(0)
	for i := range n {
		at := offset(i)
		if at < prev || at >= cfg.duration {
			t.Fatalf("offset %d = %s out of order or range", i, at)
		}
		gap := (at - prev).Seconds()
		sum += gap
		sumSq += gap * gap
		prev = at
	}
	mean := sum / float64(n)
	cv := math.Sqrt(sumSq/float64(n)-mean*mean) / mean
	if cv < 0.9 || cv > 1.1 {
		t.Errorf("coefficient of variation of gaps = %.3f, want about 1", cv)
	}
	n2, offset2 := plan(cfg)
	if n2 != n || offset2(n/2) != offset(n/2) {
		t.Errorf("same seed gave a different schedule")
	}
}

func TestErrnoName(t *testing.T) {
	wrapped := fmt.Errorf("dial: %w", syscall.ECONNREFUSED)
	if got := errnoName(wrapped); got != "ECONNREFUSED" {
		t.Errorf("got %q", got)
	}
	if got := errnoName(syscall.Errno(200)); got != "errno_200" {
		t.Errorf("got %q", got)
	}
	if got := errnoName(fmt.Errorf("plain")); got != "" {
		t.Errorf("got %q", got)
	}
}

func TestPercentile(t *testing.T) {
	s := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if p := percentile(s, 50); p != 5 {
		t.Errorf("p50 = %d", p)
	}
	if p := percentile(s, 99); p != 10 {
		t.Errorf("p99 = %d", p)
	}
	if p := percentile(nil, 50); p != 0 {
		t.Errorf("empty = %d", p)
	}
}

// Ephemeral-port exhaustion (client-side TIME_WAIT) must stay visible in the
// CSV, so build the error the way net.Dialer wraps a failed connect(2).
func TestDialResult(t *testing.T) {
	wrap := func(errno syscall.Errno) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)}
	}
	tests := []struct {
		err    error
		result string
		errno  string
	}{
		{wrap(syscall.EADDRNOTAVAIL), resConnectError, "EADDRNOTAVAIL"},
		{wrap(syscall.ECONNREFUSED), resConnectRefused, "ECONNREFUSED"},
		{wrap(syscall.ETIMEDOUT), resConnectTimeout, "ETIMEDOUT"},
		{&net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}, resConnectTimeout, ""},
	}
	for _, tt := range tests {
		if got := dialResult(tt.err); got != tt.result {
			t.Errorf("%v: result %q, want %q", tt.err, got, tt.result)
		}
		if got := errnoName(tt.err); got != tt.errno {
			t.Errorf("%v: errno %q, want %q", tt.err, got, tt.errno)
		}
	}
}

// The header is a data contract: new columns are appended, never inserted.
func TestWriteCSV(t *testing.T) {
	var b bytes.Buffer
	recs := []record{
		{startUnixNs: 10, connectUs: 5, firstByteUs: 7, result: resOK, requestsOK: 3},
		{startUnixNs: 11, connectUs: 9, firstByteUs: -1, result: resConnectError, errno: "EADDRNOTAVAIL"},
	}
	if err := writeCSV(&b, recs); err != nil {
		t.Fatal(err)
	}
	want := "start_unix_ns,conn_id,connect_us,first_byte_us,result,errno,requests_ok\n" +
		"10,0,5,7,ok,,3\n" +
		"11,1,9,,connect_error,EADDRNOTAVAIL,0\n"
	if got := b.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

// lineServer answers "ok\n" to up to maxReplies lines per connection and
// then closes, like aqserver with (-1: unlimited) or without -wait-close.
func lineServer(t *testing.T, maxReplies int) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for n := 0; maxReplies < 0 || n < maxReplies; n++ {
					if _, err := r.ReadString('\n'); err != nil {
						return
					}
					if _, err := io.WriteString(c, "ok\n"); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func TestAttemptKeepAlive(t *testing.T) {
	tests := []struct {
		name       string
		maxReplies int
		reqs       int
		wantOK     bool
		wantReqs   int
	}{
		{"single", -1, 1, true, 1},
		{"keepalive", -1, 5, true, 5},
		// The server hangs up after one reply: the connection is not ok, and
		// requests_ok says how far it got.
		{"server closes early", 1, 3, false, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config{
				target:      lineServer(t, tt.maxReplies),
				ioTimeout:   2 * time.Second,
				reqsPerConn: tt.reqs,
				reqInterval: time.Millisecond,
			}
			var rec record
			attempt(&net.Dialer{Timeout: 2 * time.Second}, cfg, time.Now(), &rec)
			if (rec.result == resOK) != tt.wantOK || rec.requestsOK != tt.wantReqs {
				t.Errorf("result=%s errno=%s requests_ok=%d, want ok=%t requests_ok=%d",
					rec.result, rec.errno, rec.requestsOK, tt.wantOK, tt.wantReqs)
			}
			if rec.firstByteUs < rec.connectUs { // also catches -1 (no reply)
				t.Errorf("first_byte_us=%d connect_us=%d", rec.firstByteUs, rec.connectUs)
			}
			if strings.HasPrefix(rec.result, "connect_") {
				t.Errorf("unexpected connect failure %s", rec.result)
			}
		})
	}
}

// -wait-eof: the client closes only after the server has, so the server is
// the active closer; a server that keeps the connection open fails the
// attempt at the I/O timeout instead of hanging it.
func TestAttemptWaitEOF(t *testing.T) {
	tests := []struct {
		name       string
		maxReplies int
		wantOK     bool
	}{
		{"server closes after its reply", 1, true},
		{"server keeps the connection", -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config{target: lineServer(t, tt.maxReplies), ioTimeout: 300 * time.Millisecond, reqsPerConn: 1, waitEOF: true}
			var rec record
			attempt(&net.Dialer{Timeout: 2 * time.Second}, cfg, time.Now(), &rec)
			if (rec.result == resOK) != tt.wantOK || rec.requestsOK != 1 {
				t.Errorf("result=%s errno=%s requests_ok=%d, want ok=%t requests_ok=1", rec.result, rec.errno, rec.requestsOK, tt.wantOK)
			}
			if !tt.wantOK && rec.result != resIOTimeout {
				t.Errorf("result=%s, want %s", rec.result, resIOTimeout)
			}
		})
	}
}
