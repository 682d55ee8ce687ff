package cluster

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ProcessOptions describes one child process run for a test.
type ProcessOptions struct {
	// Name labels the process in logs; its output goes to <Dir>/<Name>.log.
	Name string
	// Path is the binary to run.
	Path string
	// Args are its arguments.
	Args []string
	// Env is added to the test's environment.
	Env []string
	// Dir holds the log file.
	Dir string
}

// Process is a child process that a test started. It is killed when the
// test ends, and by the kernel if the test binary itself dies first.
type Process struct {
	opts    ProcessOptions
	LogPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	// raced: a run exited with the race detector's exit status.
	raced bool
}

// StartProcess starts a process and registers its clean-up with t.
func StartProcess(t T, opts ProcessOptions) *Process {
	t.Helper()
	p := &Process{opts: opts, LogPath: filepath.Join(opts.Dir, opts.Name+".log")}
	if err := p.Start(); err != nil {
		t.Fatalf("start %s: %v", opts.Name, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- last lines of %s ---\n%s", p.opts.Name, Tail(p.LogPath, 40))
		}
		p.Stop(10 * time.Second)
		p.checkRaces(t)
	})
	return p
}

// raceExitCode is the exit status of a program built with -race that found
// a data race (GORACE's exitcode, 66 unless changed).
const raceExitCode = 66

// checkRaces fails the test if a component built with -race (TETHER_RACE=1)
// reported a data race in any of its runs: its report is in the log, and a
// run that exited by itself after one exits with raceExitCode.
func (p *Process) checkRaces(t T) {
	t.Helper()
	if report := raceReport(p.LogPath, 80); report != "" {
		t.Errorf("%s: the race detector found a data race (full log: %s):\n%s", p.opts.Name, p.LogPath, report)
		return
	}
	p.mu.Lock()
	raced := p.raced
	p.mu.Unlock()
	if raced {
		t.Errorf("%s exited with status %d, the race detector's (log: %s)", p.opts.Name, raceExitCode, p.LogPath)
	}
}

// raceReport returns the first data race report in a log (at most n lines),
// or "".
func raceReport(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() && len(lines) < n {
		if len(lines) > 0 || strings.Contains(sc.Text(), "WARNING: DATA RACE") {
			lines = append(lines, sc.Text())
		}
	}
	return strings.Join(lines, "\n")
}

// Start (re)starts the process; the log file is appended to.
func (p *Process) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("%s is already running", p.opts.Name)
		}
	}
	logFile, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.opts.Path, p.opts.Args...)
	cmd.Env = append(os.Environ(), p.opts.Env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// Pdeathsig: never outlive the test binary, even when it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return err
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() {
		err := cmd.Wait()
		logFile.Close()
		p.mu.Lock()
		p.err = err
		if cmd.ProcessState != nil && cmd.ProcessState.ExitCode() == raceExitCode {
			p.raced = true
		}
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// Pid is the process id of the running process, or 0.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running reports whether the process has not exited.
func (p *Process) Running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL and waits for the process to exit.
func (p *Process) Kill() {
	p.signalAndWait(syscall.SIGKILL, time.Minute)
}

// Stop sends SIGTERM, and SIGKILL after grace.
func (p *Process) Stop(grace time.Duration) {
	if !p.signalAndWait(syscall.SIGTERM, grace) {
		p.Kill()
	}
}

// Wait blocks until the process exits or ctx ends, and returns its exit error.
func (p *Process) Wait(ctx context.Context) error {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Process) signalAndWait(sig syscall.Signal, grace time.Duration) bool {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return true
	}
	select {
	case <-done:
		return true
	default:
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig) // the whole process group
	select {
	case <-done:
		return true
	case <-time.After(grace):
		return false
	}
}

// Tail returns the last n lines of a file, for failure reports.
func Tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
