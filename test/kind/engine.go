package kind

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// engine is a private dockerd. Everything it writes is under dir: data
// (--data-root, with its containerd's root), exec (--exec-root, with its
// containerd's state and socket), docker.sock, daemon.json, dockerd.log,
// the runc wrapper. It runs in a network and mount namespace of its own,
// kept by a holder process (sleep): its bridge, iptables rules, docker-proxy
// ports and mounts never reach the host. Inside that namespace a tmpfs
// covers /run (so dockerd ignores any system containerd, and shim sockets
// in /run/containerd/s go with the namespace) and dir/etc-docker covers
// /etc/docker (dockerd 20.10 writes key.json there). Containers' cgroups
// are under a cgroup parent of its own.
type engine struct {
	dir          string
	cgroupParent string // "tether-kind-<dir's suffix>", at every hierarchy's root
	holder       *exec.Cmd
	dockerd      *exec.Cmd
	dockerdDone  chan struct{}
	logf         func(string, ...any)
}

func (e *engine) path(name string) string { return filepath.Join(e.dir, name) }
func (e *engine) socket() string          { return e.path("docker.sock") }
func (e *engine) holderPID() int          { return e.holder.Process.Pid }

// holderScript sets the namespace up, says "ready" and waits for its end.
const holderScript = `set -e
ip link set lo up
mount -t tmpfs -o mode=0755 tether-kind-run /run
if [ -d /etc/docker ]; then mount --bind "$1/etc-docker" /etc/docker; fi
echo ready
exec sleep infinity`

func startEngine(ctx context.Context, opts Options, logf func(string, ...any)) (_ *engine, err error) {
	if err := ensureDockerd(ctx, opts, logf); err != nil {
		return nil, err
	}
	CleanStale(logf)
	start := time.Now()
	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "tether-kind-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	e := &engine{dir: dir, cgroupParent: "tether-kind-" + strings.TrimPrefix(filepath.Base(dir), "tether-kind-"), logf: logf}
	defer func() {
		if err != nil {
			if stopErr := e.stop(context.Background()); stopErr != nil {
				logf("cleaning up after a failed start: %v", stopErr)
			}
		}
	}()
	if err := writeOwner(dir); err != nil {
		return e, err
	}
	for _, sub := range []string{"data", "exec", "etc-docker", "docker-config"} {
		if err := os.MkdirAll(e.path(sub), 0o700); err != nil {
			return e, err
		}
	}
	config := map[string]any{
		"cgroup-parent": "/" + e.cgroupParent,
		"exec-opts":     []string{"native.cgroupdriver=cgroupfs"},
		"log-driver":    "json-file",
	}
	if !hasCapSysResource() {
		// Lowering oom_score_adj needs CAP_SYS_RESOURCE too.
		config["oom-score-adjust"] = 0
		wrapper, err := writeRuncWrapper(e.dir)
		if err != nil {
			return e, err
		}
		config["runtimes"] = map[string]any{"tether-runc": map[string]any{"path": wrapper}}
		config["default-runtime"] = "tether-runc"
		logf("CAP_SYS_RESOURCE is not in the bounding set: runc wrapper %s is the default runtime", wrapper)
	}
	data, err := json.MarshalIndent(config, "", "  ")
	if err != nil {
		return e, err
	}
	if err := os.WriteFile(e.path("daemon.json"), data, 0o600); err != nil {
		return e, err
	}

	e.holder = exec.Command("unshare", "--net", "--mount", "--propagation", "private", "--", "sh", "-c", holderScript, "holder", e.dir)
	out, err := e.holder.StdoutPipe()
	if err != nil {
		return e, err
	}
	var holderErr strings.Builder
	e.holder.Stderr = &holderErr
	if err := e.holder.Start(); err != nil {
		return e, fmt.Errorf("unshare: %w", err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		e.holder.Wait()
		e.holder = nil
		return e, fmt.Errorf("setting up the private namespace failed: %s", strings.TrimSpace(holderErr.String()))
	}
	if err := os.WriteFile(e.path("holder.pid"), []byte(fmt.Sprint(e.holderPID())), 0o600); err != nil {
		return e, err
	}

	log, err := os.Create(e.path("dockerd.log"))
	if err != nil {
		return e, err
	}
	defer log.Close()
	e.dockerd = exec.Command("nsenter", "-t", fmt.Sprint(e.holderPID()), "-n", "-m", "--",
		"dockerd", "--config-file", e.path("daemon.json"),
		"--data-root", e.path("data"), "--exec-root", e.path("exec"),
		"--pidfile", e.path("dockerd.pid"), "-H", "unix://"+e.socket())
	e.dockerd.Stdout, e.dockerd.Stderr = log, log
	e.dockerd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a ^C of the test leaves it to Stop
	if err := e.dockerd.Start(); err != nil {
		return e, fmt.Errorf("dockerd: %w", err)
	}
	e.dockerdDone = make(chan struct{})
	go func() { e.dockerd.Wait(); close(e.dockerdDone) }()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		if _, err := os.Stat(e.socket()); err == nil {
			break
		}
		select {
		case <-e.dockerdDone:
			return e, fmt.Errorf("dockerd exited: %s", e.logTail())
		case <-ctx.Done():
			return e, fmt.Errorf("dockerd did not create its socket in 60 s: %s", e.logTail())
		case <-time.After(100 * time.Millisecond):
		}
	}
	d := &Docker{client: "docker", host: "unix://" + e.socket(), logf: logf, eng: e,
		env: []string{"DOCKER_CONFIG=" + e.path("docker-config")}}
	if err := d.ping(ctx); err != nil {
		return e, fmt.Errorf("%v: %s", err, e.logTail())
	}
	logf("private dockerd up in %v: folder %s, cgroup parent /%s", time.Since(start).Round(time.Millisecond), e.dir, e.cgroupParent)
	return e, nil
}

// logTail is the end of dockerd's log, for errors.
func (e *engine) logTail() string {
	data, _ := os.ReadFile(e.path("dockerd.log"))
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return "dockerd.log ends:\n" + strings.Join(lines, "\n")
}

// ensureDockerd installs Debian's docker.io if dockerd is missing.
func ensureDockerd(ctx context.Context, opts Options, logf func(string, ...any)) error {
	if _, err := exec.LookPath("dockerd"); err == nil {
		return nil
	}
	if opts.NoInstall {
		return fmt.Errorf("%w: dockerd is missing (apt-get install docker.io)", ErrNoDocker)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("%w: dockerd is missing and there is no apt-get", ErrNoDocker)
	}
	start := time.Now()
	logf("installing Debian's docker.io (dockerd is missing)")
	cmd := exec.CommandContext(ctx, "apt-get", "-o", "DPkg::Lock::Timeout=300", "install", "-y", "--no-install-recommends", "docker.io")
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get install docker.io: %v\n%s", err, out)
	}
	logf("docker.io installed in %v", time.Since(start).Round(time.Second))
	return nil
}
