// stop-sidecar: what the watcher's ephemeral container runs to stop one sidecar from inside its pod.
// It joins the sidecar's PID namespace (targetContainerName) and, like every container of the pod,
// its network namespace.
//
//		stop-sidecar --grace-period=SECONDS [--method=POST --url=http://localhost:PORT/PATH] [--container-id=ID]
//
//	 1. With --url, it sends that HTTP request (loopback only): a proxy's own shutdown endpoint. A
//	    request that fails or answers other than 2xx falls back to SIGTERM. A connection the
//	    sidecar closes without an answer (a proxy that exits on the request before its answer is
//	    written, as cloud-sql-proxy can) is given a few seconds to show the sidecar exiting first.
//	 2. Otherwise it sends SIGTERM to the sidecar: PID 1 of the namespace; or, with --container-id
//	    (a pod with shareProcessNamespace, where PID 1 is the pause process), the process of that
//	    container whose parent is outside it, found by the container ID in /proc/PID/cgroup.
//	    The kernel drops a signal sent to a namespace's PID 1 from inside it unless PID 1 handles it
//	    (SIGKILL included) or blocks it to wait for it (tini does): when /proc/1/status shows neither
//	    for SIGTERM, it says so and exits 3 at once, so that the watcher ends the sidecar from outside
//	    (through the kubelet) without waiting.
//	 3. It waits --grace-period for the sidecar to exit. When PID 1 exits, the kernel kills
//	    everything left in its namespace, this program included (137). Still running at the end:
//	    it sends SIGKILL to the sidecar's other processes (an init that forwards SIGTERM to a child
//	    ignoring it then exits), or to the sidecar's processes of a shared namespace; if PID 1 still
//	    runs a few seconds later, it exits 4.
//
// Exit codes: 0 the sidecar exited; 1 a signal could not be sent (EPERM: another user); 2 usage;
// 3 PID 1 has no SIGTERM handler; 4 still running after the grace period; 143 sent SIGTERM (the pod
// ending) while the sidecar still ran. What it did goes to stdout and to the termination message,
// line by line, each with its time; a signal or request is written before it is sent, since the
// sidecar's exit may end this program at once.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	exitSignalFailed = 1
	exitUsage        = 2
	exitNoHandler    = 3
	exitStillRunning = 4
	exitTerminated   = 128 + int(syscall.SIGTERM)
	terminationLog   = "/dev/termination-log"
	poll             = 100 * time.Millisecond
	afterKill        = 5 * time.Second
	requestTimeout   = 10 * time.Second
	retryRefused     = 10 * time.Second
	retryPause       = 250 * time.Millisecond
	// How long a sidecar that closed the connection on its shutdown request is watched for its
	// exit before it is sent SIGTERM.
	closedSettle = 3 * time.Second
)

// message is the termination message, opened once for appending: the program may be killed at any
// moment (when the sidecar, PID 1, exits), so each line goes in with one write and nothing written
// is ever truncated away. Nil when the file cannot be opened (run outside a pod).
var message, _ = os.OpenFile(terminationLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)

// report prints a line and adds it to the termination message.
func report(format string, args ...any) {
	line := fmt.Sprintf("%s %s\n", time.Now().UTC().Format(time.RFC3339), fmt.Sprintf(format, args...))
	fmt.Print(line)
	if message != nil {
		_, _ = message.WriteString(line)
	}
}

func fail(code int, format string, args ...any) {
	report(format, args...)
	os.Exit(code)
}

// loopback is the only kind of host a shutdown request may go to: the pod's own network namespace.
func loopback(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}

func main() {
	grace := flag.Int("grace-period", 30, "seconds to wait for the sidecar to exit before killing what can be killed from inside")
	method := flag.String("method", "POST", "method of the shutdown request")
	target := flag.String("url", "", "shutdown request to send first, http://localhost:PORT/PATH")
	containerID := flag.String("container-id", "", "in a pod with shareProcessNamespace: the sidecar's container ID")
	flag.Parse()
	if flag.NArg() > 0 || *grace < 0 {
		fmt.Fprintln(os.Stderr, "usage: stop-sidecar --grace-period=SECONDS [--method=POST --url=http://localhost:PORT/PATH] [--container-id=ID]")
		os.Exit(exitUsage)
	}
	sidecar := findSidecar(*containerID)
	// The kubelet sends SIGTERM when it ends the pod. In a shared PID namespace that can fall between
	// the sidecar's exit and this program's next look (a poll apart), and is then a success.
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	go func() {
		<-terms
		if sidecar.exited() {
			fail(0, "the sidecar exited")
		}
		fail(exitTerminated, "told to stop (SIGTERM) while the sidecar still runs: the pod is ending")
	}()
	deadline := time.Now().Add(time.Duration(*grace) * time.Second)

	asked := false
	if *target != "" {
		asked = shutdownRequest(sidecar, *method, *target, *grace)
	}
	if !asked {
		terminate(sidecar)
	}
	for time.Now().Before(deadline) {
		if sidecar.exited() {
			fail(0, "the sidecar exited")
		}
		time.Sleep(poll)
	}
	report("the sidecar still runs %ds after it was told to stop: killing its processes", *grace)
	sidecar.killRest()
	for end := time.Now().Add(afterKill); time.Now().Before(end); time.Sleep(poll) {
		if sidecar.exited() {
			fail(0, "the sidecar exited")
		}
	}
	fail(exitStillRunning, "the sidecar still runs: %s keeps running after SIGTERM and cannot be killed from inside its PID namespace", sidecar.describe())
}

// shutdownRequest sends the request; true when the sidecar answered 2xx.
func shutdownRequest(sidecar *sidecar, method, raw string, grace int) bool {
	parsed, err := url.Parse(raw)
	if err != nil || parsed.Scheme != "http" || !loopback(parsed.Hostname()) || parsed.Port() == "" {
		fail(exitUsage, "refusing %s %s: only http://localhost:PORT, http://127.0.0.1:PORT or http://[::1]:PORT, the pod's own loopback", method, raw)
	}
	request, err := http.NewRequest(method, raw, nil)
	if err != nil {
		fail(exitUsage, "%s %s: %v", method, raw, err)
	}
	client := &http.Client{Timeout: requestTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	// A sidecar still starting may not listen yet: a refused connection is tried again for a while.
	retryUntil := time.Now().Add(min(retryRefused, time.Duration(grace)*time.Second/2))
	// Said before it is sent: a sidecar that exits on it may end this program before any answer.
	report("%s %s: sending the shutdown request", method, raw)
	response, err := client.Do(request)
	for err != nil && errors.Is(err, syscall.ECONNREFUSED) && time.Now().Before(retryUntil) {
		time.Sleep(retryPause)
		response, err = client.Do(request)
	}
	if err != nil && closedWithoutAnswer(err) {
		// The request reached the sidecar, which may be exiting on it: SIGTERM only if it is not.
		report("%s %s: the connection closed without an answer (%v); watching the sidecar for %s", method, raw, err, closedSettle)
		for end := time.Now().Add(min(closedSettle, time.Duration(grace)*time.Second)); time.Now().Before(end); time.Sleep(poll) {
			if sidecar.exited() {
				fail(0, "the sidecar exited")
			}
		}
		report("%s %s: the sidecar still runs: sending SIGTERM instead", method, raw)
		return false
	}
	if err != nil {
		report("%s %s failed (%v): sending SIGTERM instead", method, raw, err)
		return false
	}
	_ = response.Body.Close()
	if response.StatusCode < 200 || response.StatusCode > 299 {
		report("%s %s answered %s: sending SIGTERM instead", method, raw, response.Status)
		return false
	}
	report("%s %s answered %s", method, raw, response.Status)
	return true
}

// closedWithoutAnswer says whether the sidecar accepted the connection and closed it before its
// answer: the request may have been read and acted on.
func closedWithoutAnswer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

func terminate(sidecar *sidecar) {
	if sidecar.pid == 1 {
		caught, ignored := signalMasks(1)
		// An init that waits for signals with sigtimedwait (tini) unblocks them only while it
		// waits, which /proc cannot show: one that runs other processes is sent SIGTERM all the
		// same, and ends with them if they are killed at the end of the grace period.
		children := len(descendants(1)) > 0
		if ignored || (!caught && !children) {
			how := "installs no SIGTERM handler and runs no other process"
			if ignored {
				how = "ignores SIGTERM"
			}
			fail(exitNoHandler, "PID 1 (%s) %s: the kernel drops SIGTERM and SIGKILL sent to it from inside its PID namespace, so it can only be ended from outside", command(1), how)
		}
	}
	// Said before it is sent: a sidecar that exits on it at once ends this program with it.
	report("sending SIGTERM to PID %d (%s)", sidecar.pid, command(sidecar.pid))
	if err := syscall.Kill(sidecar.pid, syscall.SIGTERM); err != nil {
		hint := ""
		if err == syscall.EPERM {
			hint = " (EPERM: this container runs as another user than the sidecar)"
		}
		fail(exitSignalFailed, "SIGTERM to PID %d (%s) failed: %v%s", sidecar.pid, command(sidecar.pid), err, hint)
	}
}

// sidecar is the process tree to stop: PID 1 and its descendants, or one container's processes in
// a shared PID namespace.
type sidecar struct {
	pid         int
	containerID string
}

func findSidecar(containerID string) *sidecar {
	if containerID == "" {
		return &sidecar{pid: 1}
	}
	pids := containerProcesses(containerID)
	if len(pids) == 0 {
		fail(0, "no process of container %s is left: the sidecar exited", containerID)
	}
	in := map[int]bool{}
	for _, pid := range pids {
		in[pid] = true
	}
	for _, pid := range pids {
		if !in[parent(pid)] {
			return &sidecar{pid: pid, containerID: containerID}
		}
	}
	return &sidecar{pid: pids[0], containerID: containerID}
}

func (s *sidecar) exited() bool {
	if s.containerID != "" {
		return len(containerProcesses(s.containerID)) == 0
	}
	// PID 1's exit ends this program too; a zombie PID 1 has exited all the same.
	state := procState(s.pid)
	return state == "" || state == "Z"
}

func (s *sidecar) describe() string {
	return fmt.Sprintf("PID %d (%s)", s.pid, command(s.pid))
}

// killRest sends SIGKILL to what can be killed from inside: every descendant of PID 1 (not the
// processes of other ephemeral containers, whose parent is outside the namespace), or every
// process of the container in a shared namespace.
func (s *sidecar) killRest() {
	victims := descendants(1)
	if s.containerID != "" {
		victims = containerProcesses(s.containerID)
	}
	for _, pid := range victims {
		name := command(pid)
		// Said before it is sent: PID 1 may exit once its children are gone, ending this program.
		report("sending SIGKILL to PID %d (%s)", pid, name)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			report("SIGKILL to PID %d (%s) failed: %v", pid, name, err)
		}
	}
}

// descendants are the processes below `ancestor` (not this program's, nor those of other
// ephemeral containers, whose parent is outside the namespace).
func descendants(ancestor int) []int {
	var found []int
	self := os.Getpid()
	for _, pid := range allPIDs() {
		if pid != ancestor && pid != self && descendsFrom(pid, ancestor) {
			found = append(found, pid)
		}
	}
	return found
}

func allPIDs() []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		fail(exitSignalFailed, "cannot read /proc: %v", err)
	}
	var pids []int
	for _, entry := range entries {
		if pid, err := strconv.Atoi(entry.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// containerProcesses are the processes whose cgroup names the container ID (cgroupfs:
// .../<id>; systemd: .../cri-containerd-<id>.scope; v1 and v2 alike).
func containerProcesses(containerID string) []int {
	var pids []int
	for _, pid := range allPIDs() {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err == nil && strings.Contains(string(data), containerID) && procState(pid) != "Z" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// stat fields after the command: state, then the parent's PID.
func statFields(pid int) []string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	text := string(data)
	end := strings.LastIndexByte(text, ')')
	if end < 0 {
		return nil
	}
	return strings.Fields(text[end+1:])
}

func procState(pid int) string {
	fields := statFields(pid)
	if len(fields) < 1 {
		return ""
	}
	return fields[0]
}

func parent(pid int) int {
	fields := statFields(pid)
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

func descendsFrom(pid, ancestor int) bool {
	for seen := 0; pid > 1 && seen < 4096; seen++ {
		pid = parent(pid)
		if pid == ancestor {
			return true
		}
	}
	return false
}

func command(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(data) == 0 {
		return "?"
	}
	text := strings.TrimRight(strings.ReplaceAll(string(data), "\x00", " "), " ")
	if len(text) > 80 {
		text = text[:80] + "..."
	}
	return text
}

// signalMasks says whether a process takes SIGTERM, with a handler (SigCgt) or by blocking it to
// wait for it (SigBlk: the kernel queues a blocked signal whatever its disposition), and whether
// it ignores it (SigIgn) without blocking it.
func signalMasks(pid int) (caught, ignored bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		// Unknown: send SIGTERM and let the grace period tell.
		return true, false
	}
	bit := uint64(1) << (uint(syscall.SIGTERM) - 1)
	blocked := false
	for _, line := range strings.Split(string(data), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(value), 16, 64)
		if err != nil {
			continue
		}
		switch name {
		case "SigCgt":
			caught = mask&bit != 0
		case "SigIgn":
			ignored = mask&bit != 0
		case "SigBlk":
			blocked = mask&bit != 0
		}
	}
	if blocked {
		return true, false
	}
	return caught, ignored
}
