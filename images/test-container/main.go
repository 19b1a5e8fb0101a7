// test-container: the one program behind the test images of the real-node end-to-end tests, so each
// behaviour a test relies on is explicit and logged.
//
//	test-container main [--wait-tcp host:port [--wait-timeout 5m]] [--sleep 2s] [--exit 0]
//	                    [--fail-times N --state /path [--fail-exit 1]]
//	    works for --sleep, then exits with --exit; with --fail-times it exits --fail-exit on its
//	    first N runs (counted in the --state file, which must survive a restart: an emptyDir), then
//	    --exit. With --wait-tcp it first waits until that address accepts a connection: a sidecar's
//	    port, so that the sidecar has started (and installed its signal handlers) when the work
//	    ends, and on a later run that it still serves; it exits 2 if it does not within --wait-timeout.
//	test-container sidecar [--on-term 0] [--ignore-term] [--listen :port [--exit-on-request]]
//	    runs until it gets SIGTERM or SIGINT, logs the signal and exits with --on-term; with
//	    --ignore-term it logs SIGTERM and keeps running (only SIGKILL stops it); with --listen it
//	    accepts (and closes) TCP connections on that address meanwhile; with --exit-on-request, a
//	    connection that sends bytes makes it exit 0 without answering (as a proxy whose shutdown
//	    endpoint ends it before its answer is written).
//
// Every line it prints starts with its uid, so a test can tell which user it ran as.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func logf(format string, args ...any) {
	fmt.Printf("uid=%d %s\n", os.Getuid(), fmt.Sprintf(format, args...))
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: test-container main|sidecar [flags]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "main":
		runMain(os.Args[2:])
	case "sidecar":
		runSidecar(os.Args[2:])
	default:
		fmt.Fprintf(os.Stderr, "test-container: unknown mode %q (main or sidecar)\n", os.Args[1])
		os.Exit(2)
	}
}

func runMain(args []string) {
	flags := flag.NewFlagSet("main", flag.ExitOnError)
	sleep := flags.Duration("sleep", 2*time.Second, "how long to work")
	exit := flags.Int("exit", 0, "exit code once done")
	failTimes := flags.Int("fail-times", 0, "exit with --fail-exit on the first N runs")
	failExit := flags.Int("fail-exit", 1, "exit code of the runs --fail-times fails")
	waitTimeout := flags.Duration("wait-timeout", 5*time.Minute, "how long --wait-tcp waits")
	state := flags.String("state", "", "file counting the runs (with --fail-times)")
	waitTCP := flags.String("wait-tcp", "", "host:port to wait for (a sidecar listening) before working")
	_ = flags.Parse(args)
	if *waitTCP != "" {
		waitForListener(*waitTCP, *waitTimeout)
	}

	run := 1
	if *failTimes > 0 {
		if *state == "" {
			fmt.Fprintln(os.Stderr, "--fail-times needs --state")
			os.Exit(2)
		}
		if data, err := os.ReadFile(*state); err == nil {
			previous, _ := strconv.Atoi(strings.TrimSpace(string(data)))
			run = previous + 1
		}
		if err := os.WriteFile(*state, []byte(strconv.Itoa(run)), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "writing %s: %v\n", *state, err)
			os.Exit(2)
		}
	}
	logf("main: run %d, working for %s", run, *sleep)
	time.Sleep(*sleep)
	if run <= *failTimes {
		logf("main: run %d fails with exit code %d", run, *failExit)
		os.Exit(*failExit)
	}
	logf("main: done, exit code %d", *exit)
	os.Exit(*exit)
}

// waitForListener returns once address accepts a TCP connection; it exits 2 after limit.
func waitForListener(address string, limit time.Duration) {
	logf("main: waiting for %s to accept connections", address)
	deadline := time.Now().Add(limit)
	for {
		conn, err := net.DialTimeout("tcp", address, time.Second)
		if err == nil {
			conn.Close()
			logf("main: %s accepts connections", address)
			return
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "%s did not accept a connection within %s: %v\n", address, limit, err)
			os.Exit(2)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func runSidecar(args []string) {
	flags := flag.NewFlagSet("sidecar", flag.ExitOnError)
	onTerm := flags.Int("on-term", 0, "exit code on SIGTERM or SIGINT")
	ignoreTerm := flags.Bool("ignore-term", false, "keep running on SIGTERM")
	listen := flags.String("listen", "", "address to accept TCP connections on while running")
	exitOnRequest := flags.Bool("exit-on-request", false, "with --listen: exit 0, without answering, on the first connection that sends bytes")
	_ = flags.Parse(args)
	if *listen != "" {
		listener, err := net.Listen("tcp", *listen)
		if err != nil {
			fmt.Fprintf(os.Stderr, "listening on %s: %v\n", *listen, err)
			os.Exit(2)
		}
		logf("sidecar: listening on %s", *listen)
		go func() {
			for {
				conn, err := listener.Accept()
				if err != nil {
					return
				}
				if *exitOnRequest {
					_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
					if n, _ := conn.Read(make([]byte, 1024)); n > 0 {
						conn.Close()
						logf("sidecar: received a request on %s, exiting with code 0 without answering", *listen)
						os.Exit(0)
					}
				}
				conn.Close()
			}
		}()
	}

	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	logf("sidecar: running as pid %d", os.Getpid())
	for sig := range signals {
		name := "SIGTERM"
		if sig == syscall.SIGINT {
			name = "SIGINT"
		}
		if *ignoreTerm && sig == syscall.SIGTERM {
			logf("sidecar: received %s, ignoring it", name)
			continue
		}
		logf("sidecar: received %s, exiting with code %d", name, *onTerm)
		os.Exit(*onTerm)
	}
}
