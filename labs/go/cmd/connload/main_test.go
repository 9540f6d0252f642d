package main

import (
	"fmt"
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
