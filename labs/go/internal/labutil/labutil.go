// Package labutil holds the few helpers that the lab commands (aqserver,
// connload, connhold, httpserver, loopserver) share. It exists so that the
// contracts the lab scripts rely on, such as how a ready file appears, the
// layout of a stats file and which signals mean "stop", are defined once
// rather than kept in step by hand across commands. Anything specific to one
// command stays there.
package labutil

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// SignalContext returns a context that is cancelled on SIGINT or SIGTERM, so
// every command treats the same signals as a request for an orderly stop
// (write what was collected, then exit). Call stop to release the handler.
func SignalContext() (ctx context.Context, stop context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
}

// SetUsage installs a flag.Usage that prints text verbatim followed by the
// flag defaults, the layout every command's -h uses.
func SetUsage(text string) {
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), text)
		flag.PrintDefaults()
	}
}

// FlagsEnv names the environment variable through which a lab hands a server
// flags that must not show in its command line: in a training incident `ps`
// and `ss -p` would otherwise give the fault away (-backlog 16 on one
// listener, -work 10ms on one loop). /proc/PID/environ still holds them, as a
// real server's configuration file would.
const FlagsEnv = "TQ_SERVER_FLAGS"

// ParseFlags parses fs from the whitespace-separated flags in $TQ_SERVER_FLAGS
// first, then from args, so a flag given on the command line wins. Flags in
// the environment take no positional arguments.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if env := strings.Fields(os.Getenv(FlagsEnv)); len(env) > 0 {
		if err := fs.Parse(env); err != nil {
			return fmt.Errorf("%s: %w", FlagsEnv, err)
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("%s: unexpected arguments %q", FlagsEnv, fs.Args())
		}
	}
	return fs.Parse(args)
}

// ExitUsage reports an invalid command line as "prog: err", prints the usage
// and exits with status 2, the same status the flag package uses for a flag
// it cannot parse, so scripts see one code for every kind of misuse.
func ExitUsage(prog string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", prog, err)
	flag.Usage()
	os.Exit(2)
}

// WriteReadyFile atomically writes line plus a newline to path, and does
// nothing when path is empty (the flag was not given). Lab scripts poll for
// the file to appear and then read it at once, so they must never see it
// half written. Errors are prefixed with "ready file: ".
func WriteReadyFile(path, line string) error {
	if path == "" {
		return nil
	}
	if err := writeFileAtomic(path, []byte(line+"\n")); err != nil {
		return fmt.Errorf("ready file: %w", err)
	}
	return nil
}

// WriteStatsFile atomically writes v as indented JSON plus a newline to path,
// and does nothing when path is empty (the flag was not given). The analysis
// reads these files after a run, so every command writes them the same way.
// Errors writing the file are prefixed with "stats file: "; a marshalling
// error is returned as is.
func WriteStatsFile(path string, v any) error {
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(path, append(b, '\n')); err != nil {
		return fmt.Errorf("stats file: %w", err)
	}
	return nil
}

// writeFileAtomic writes via a temporary file and rename, so a watcher never
// observes a partially written file.
func writeFileAtomic(path string, data []byte) error {
	if !RenameSafe(path) {
		return os.WriteFile(path, data, 0o644)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// IsTimeout reports whether a network error is a timeout in any of the forms
// Go delivers one: a deadline set on the connection or dialer
// (os.ErrDeadlineExceeded or a net.Error with Timeout), or the kernel giving
// up on a connect or a connection (ETIMEDOUT). The clients use it to tell
// timeouts, the typical accept-queue symptom, apart from other failures.
func IsTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, syscall.ETIMEDOUT) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// ListenSockaddr is the socket family and bind address of ip:port for a
// listener the labs make with raw syscalls (to choose the backlog, which
// net.Listen does not let them): AF_INET for an IPv4 address (or none: any
// IPv4 address), AF_INET6 for an IPv6 one, so that a lab runs over either.
func ListenSockaddr(ip net.IP, port int) (int, syscall.Sockaddr, error) {
	if ip == nil {
		return syscall.AF_INET, &syscall.SockaddrInet4{Port: port}, nil
	}
	if ip4 := ip.To4(); ip4 != nil {
		sa := &syscall.SockaddrInet4{Port: port}
		copy(sa.Addr[:], ip4)
		return syscall.AF_INET, sa, nil
	}
	if ip16 := ip.To16(); ip16 != nil {
		sa := &syscall.SockaddrInet6{Port: port}
		copy(sa.Addr[:], ip16)
		return syscall.AF_INET6, sa, nil
	}
	return 0, nil, fmt.Errorf("%q is not an IP address", ip)
}

// SockaddrPort is the port of an AF_INET or AF_INET6 address (getsockname's).
func SockaddrPort(sa syscall.Sockaddr) int {
	switch a := sa.(type) {
	case *syscall.SockaddrInet4:
		return a.Port
	case *syscall.SockaddrInet6:
		return a.Port
	}
	return 0
}

// RenameSafe reports whether PATH may be replaced by renaming a new file onto it: not when it
// is there and not a regular file. A rename onto /dev/null (connload -out /dev/null) replaced
// the host's device with a regular file, and every later `>/dev/null` wrote into it.
func RenameSafe(path string) bool {
	fi, err := os.Stat(path)
	return err != nil || fi.Mode().IsRegular()
}
