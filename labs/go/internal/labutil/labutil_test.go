package labutil

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Lab scripts read the ready file as one line and must never find the
// temporary file left behind.
func TestWriteReadyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ready")
	if err := WriteReadyFile(path, "127.0.0.1:8080"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "127.0.0.1:8080\n" {
		t.Errorf("got %q", got)
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary file left behind: %v", err)
	}
}

func TestWriteReadyFileEmptyPath(t *testing.T) {
	if err := WriteReadyFile("", "x"); err != nil {
		t.Errorf("empty path: %v", err)
	}
}

func TestWriteReadyFileError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing-dir", "ready")
	err := WriteReadyFile(path, "x")
	if err == nil || !strings.HasPrefix(err.Error(), "ready file: ") || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("got %v", err)
	}
}

// The stats layout (two-space indent, trailing newline) is what the servers
// have always written; keep it byte for byte.
func TestWriteStatsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stats.json")
	v := struct {
		Requests int64    `json:"requests"`
		Stalls   []string `json:"stalls"`
	}{Requests: 3, Stalls: []string{}}
	if err := WriteStatsFile(path, v); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"requests\": 3,\n  \"stalls\": []\n}\n"
	if string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if err := WriteStatsFile("", v); err != nil {
		t.Errorf("empty path: %v", err)
	}
	err = WriteStatsFile(filepath.Join(t.TempDir(), "missing-dir", "stats.json"), v)
	if err == nil || !strings.HasPrefix(err.Error(), "stats file: ") {
		t.Errorf("got %v", err)
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestIsTimeout(t *testing.T) {
	dial := func(err error) error { return &net.OpError{Op: "dial", Net: "tcp", Err: err} }
	tests := []struct {
		err  error
		want bool
	}{
		{dial(os.ErrDeadlineExceeded), true},
		{dial(os.NewSyscallError("connect", syscall.ETIMEDOUT)), true},
		{fmt.Errorf("wrapped: %w", timeoutErr{}), true},
		{dial(os.NewSyscallError("connect", syscall.ECONNREFUSED)), false},
		{dial(os.NewSyscallError("connect", syscall.EADDRNOTAVAIL)), false},
		{errors.New("plain"), false},
	}
	for _, tt := range tests {
		if got := IsTimeout(tt.err); got != tt.want {
			t.Errorf("IsTimeout(%v) = %t, want %t", tt.err, got, tt.want)
		}
	}
}

// A training incident hands the fault's flags through the environment: they
// must apply, and the command line must still win.
func TestParseFlagsFromTheEnvironmentFirst(t *testing.T) {
	t.Setenv(FlagsEnv, " -backlog 16\t-work 10ms,200us ")
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	backlog := fs.Int("backlog", 1024, "")
	work := fs.String("work", "0s", "")
	listen := fs.String("listen", "", "")
	if err := ParseFlags(fs, []string{"-listen", "1.2.3.4:5", "-work", "1ms"}); err != nil {
		t.Fatal(err)
	}
	if *backlog != 16 || *work != "1ms" || *listen != "1.2.3.4:5" {
		t.Errorf("backlog %d, work %q, listen %q", *backlog, *work, *listen)
	}
	t.Setenv(FlagsEnv, "-backlog 16 stray")
	fs = flag.NewFlagSet("t", flag.ContinueOnError)
	fs.Int("backlog", 1024, "")
	if err := ParseFlags(fs, nil); err == nil || !strings.Contains(err.Error(), FlagsEnv) {
		t.Errorf("a stray word in %s: %v", FlagsEnv, err)
	}
}

func TestListenSockaddrByFamily(t *testing.T) {
	for _, tc := range []struct {
		ip     string
		family int
		port   int
	}{{"198.18.0.1", syscall.AF_INET, 8080}, {"2001:2::1", syscall.AF_INET6, 8081}, {"", syscall.AF_INET, 80}} {
		family, sa, err := ListenSockaddr(net.ParseIP(tc.ip), tc.port)
		if err != nil || family != tc.family || SockaddrPort(sa) != tc.port {
			t.Errorf("%q: family %d port %d err %v, want %d %d", tc.ip, family, SockaddrPort(sa), err, tc.family, tc.port)
		}
	}
	if _, _, err := ListenSockaddr(net.IP{1, 2, 3}, 80); err == nil {
		t.Error("a 3-byte address: no error")
	}
}

// A rename replaces what is there: only a regular file (or nothing) may be replaced so;
// /dev/null and a directory are written in place or refused.
func TestRenameSafe(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "out.csv")
	if err := os.WriteFile(file, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{file: true, filepath.Join(dir, "new.csv"): true, os.DevNull: false, dir: false} {
		if got := RenameSafe(path); got != want {
			t.Errorf("RenameSafe(%q) = %v, want %v", path, got, want)
		}
	}
}
