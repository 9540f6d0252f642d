package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseWork(t *testing.T) {
	ms, us := time.Millisecond, time.Microsecond
	tests := []struct {
		in    string
		loops int
		want  []time.Duration
		bad   bool
	}{
		{"10ms,200us", 4, []time.Duration{10 * ms, 200 * us, 200 * us, 200 * us}, false},
		{"0s", 2, []time.Duration{0, 0}, false},
		{"1ms, 2ms", 2, []time.Duration{ms, 2 * ms}, false},
		{"1ms,2ms,3ms", 2, nil, true},
		{"-1ms", 1, nil, true},
		{"fast", 1, nil, true},
	}
	for _, tt := range tests {
		got, err := parseWork(tt.in, tt.loops)
		if (err != nil) != tt.bad {
			t.Errorf("%q: err = %v, want error %t", tt.in, err, tt.bad)
			continue
		}
		if !tt.bad && (len(got) != len(tt.want) || strings.Join(durs(got), ",") != strings.Join(durs(tt.want), ",")) {
			t.Errorf("%q: got %v, want %v", tt.in, got, tt.want)
		}
	}
}

func durs(ds []time.Duration) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.String()
	}
	return out
}

// startServer runs the server in this process until the returned stop is
// called; stop returns the stats it wrote.
func startServer(t *testing.T, cfg config) ([]string, func() stats) {
	t.Helper()
	dir := t.TempDir()
	cfg.readyFile = filepath.Join(dir, "ready")
	cfg.statsFile = filepath.Join(dir, "stats.json")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(cfg.readyFile)
		if err == nil {
			addrs := strings.Fields(string(b))
			if len(addrs) != cfg.loops {
				t.Fatalf("ready file lists %d addresses for %d loops: %q", len(addrs), cfg.loops, b)
			}
			return addrs, func() stats {
				cancel()
				if err := <-done; err != nil {
					t.Fatalf("run: %v", err)
				}
				var st stats
				b, err := os.ReadFile(cfg.statsFile)
				if err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(b, &st); err != nil {
					t.Fatal(err)
				}
				return st
			}
		}
		select {
		case err := <-done:
			t.Fatalf("server exited before ready: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("server not ready in 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// get sends n pipelined GETs and reads n answers.
func get(t *testing.T, c net.Conn, r *bufio.Reader, n int) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	req := strings.Repeat("GET / HTTP/1.1\r\nHost: lab\r\n\r\n", n)
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	for range n {
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if line == "hello\n" {
				break
			}
		}
	}
}

// Every loop answers on its own port, from its own thread, named loop<i>,
// and accounts for its own requests.
func TestLoopsServeFromTheirOwnNamedThreads(t *testing.T) {
	addrs, stop := startServer(t, config{listen: "127.0.0.1:0", loops: 2, work: []time.Duration{0, 0}, backlog: 16})
	for i, a := range addrs {
		c, err := net.Dial("tcp4", a)
		if err != nil {
			t.Fatal(err)
		}
		get(t, c, bufio.NewReader(c), i+2)
		c.Close()
	}
	names := map[string]bool{}
	tasks, _ := filepath.Glob("/proc/self/task/*/comm")
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		names[strings.TrimSpace(string(b))] = true
	}
	if !names["loop0"] || !names["loop1"] {
		t.Errorf("thread names %v: want loop0 and loop1", names)
	}
	st := stop()
	if st.Pid != os.Getpid() || len(st.Loops) != 2 {
		t.Fatalf("stats %+v", st)
	}
	for i, l := range st.Loops {
		if l.Index != i || l.Comm != "loop"+string(rune('0'+i)) || l.Tid <= 0 || l.Listen != addrs[i] {
			t.Errorf("loop %d: %+v", i, l)
		}
		if l.Accepted != 1 || l.Requests != int64(i+2) {
			t.Errorf("loop %d: accepted %d requests %d, want 1 and %d", i, l.Accepted, l.Requests, i+2)
		}
	}
	if st.Loops[0].Tid == st.Loops[1].Tid {
		t.Errorf("both loops ran on thread %d", st.Loops[0].Tid)
	}
}

// Over IPv6 too (the training incidents draw either family): each loop listens
// on the IPv6 address it is given, port + i, and answers there.
func TestLoopsListenOnAnIPv6Address(t *testing.T) {
	addrs, stop := startServer(t, config{listen: "[::1]:0", loops: 2, work: []time.Duration{0, 0}, backlog: 16})
	for _, a := range addrs {
		if !strings.HasPrefix(a, "[::1]:") {
			t.Errorf("loop listens on %s, want [::1]:port", a)
		}
		c, err := net.Dial("tcp6", a)
		if err != nil {
			t.Fatal(err)
		}
		get(t, c, bufio.NewReader(c), 1)
		c.Close()
	}
	if st := stop(); st.Loops[0].Requests != 1 || st.Loops[1].Requests != 1 {
		t.Errorf("stats %+v: want one request per loop", st)
	}
}

// A loop whose handler costs more than its clients leave it never waits: its
// thread's CPU time is the load's length, while an idle loop beside it spends
// its life blocked in epoll_wait. What the lab's saturated-loop variant rests on.
func TestHotLoopBesideAnIdleOne(t *testing.T) {
	addrs, stop := startServer(t, config{listen: "127.0.0.1:0", loops: 2, work: []time.Duration{2 * time.Millisecond, 0}, backlog: 16})
	var wg sync.WaitGroup
	until := time.Now().Add(400 * time.Millisecond)
	for range 4 {
		wg.Go(func() {
			c, err := net.Dial("tcp4", addrs[0])
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			r := bufio.NewReader(c)
			for time.Now().Before(until) {
				get(t, c, r, 1)
			}
		})
	}
	wg.Wait()
	st := stop()
	hot, idle := st.Loops[0], st.Loops[1]
	// Not "most of the 400 ms": CI shares the CPU. What does not depend on the machine's
	// load: it served many requests and spent far more CPU than the idle loop.
	if hot.Requests < 20 || hot.CPUNs < 20*max(idle.CPUNs, int64(time.Millisecond)) {
		t.Errorf("hot loop: %d requests, %s of CPU (idle loop %s)", hot.Requests, time.Duration(hot.CPUNs), time.Duration(idle.CPUNs))
	}
	if idle.Requests != 0 || idle.CPUNs > int64(50*time.Millisecond) {
		t.Errorf("idle loop: %d requests, %s of CPU", idle.Requests, time.Duration(idle.CPUNs))
	}
	if life := idle.EndNs - idle.StartNs; idle.WaitNs < life*8/10 {
		t.Errorf("idle loop blocked %s of its %s", time.Duration(idle.WaitNs), time.Duration(life))
	}
}
