package kind

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Options says which docker engine Start gives.
type Options struct {
	// Private forces a private dockerd even when the user's docker works.
	Private bool
	// Dir is the private engine's folder (created, and removed by Stop);
	// empty: a new folder under os.TempDir().
	Dir string
	// NoInstall refuses to apt-get install docker.io when dockerd is missing.
	NoInstall bool
	// Logf, if set, is told what Start and Stop do and how long it took.
	Logf func(format string, args ...any)
}

// Docker is a running docker engine.
type Docker struct {
	host   string   // DOCKER_HOST
	client string   // the docker CLI
	env    []string // extra environment of Command
	logf   func(string, ...any)
	eng    *engine // nil: the user's engine, which Stop leaves alone
}

// ErrNoDocker means neither the user's docker nor a private one can run
// here (not root, or no dockerd and no apt-get); tests skip on it.
var ErrNoDocker = errors.New("no docker engine")

// Start gives a docker engine: the user's (DOCKER_HOST set, or a working
// /var/run/docker.sock) unless opts.Private, else a private dockerd (root
// only), installing Debian's docker.io first if dockerd is missing.
func Start(ctx context.Context, opts Options) (*Docker, error) {
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	client, err := exec.LookPath("docker")
	if err != nil {
		return nil, fmt.Errorf("%w: the docker CLI is not in PATH", ErrNoDocker)
	}
	d := &Docker{client: client, logf: logf}
	if !opts.Private {
		if host := os.Getenv("DOCKER_HOST"); host != "" {
			d.host = host
			return d, d.ping(ctx)
		}
		if _, err := os.Stat("/var/run/docker.sock"); err == nil {
			d.host = "unix:///var/run/docker.sock"
			if err := d.ping(ctx); err == nil {
				logf("using the user's docker at %s", d.host)
				return d, nil
			}
		}
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: a private dockerd needs root (or set DOCKER_HOST)", ErrNoDocker)
	}
	eng, err := startEngine(ctx, opts, logf)
	if err != nil {
		return nil, err
	}
	d.eng, d.host = eng, "unix://"+eng.socket()
	d.env = []string{"DOCKER_CONFIG=" + eng.path("docker-config")}
	return d, nil
}

// ping waits up to 30 s for the engine to answer.
func (d *Docker) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out []byte
	var err error
	for ctx.Err() == nil {
		if out, err = d.Command(ctx, d.client, "version", "--format", "{{.Server.Version}} (API {{.Server.APIVersion}})").CombinedOutput(); err == nil {
			d.logf("docker engine %s at %s", strings.TrimSpace(string(out)), d.host)
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("docker at %s does not answer: %v: %s", d.host, err, out)
}

// Host is the engine's DOCKER_HOST.
func (d *Docker) Host() string { return d.host }

// Private says whether Start started the engine (Stop removes it).
func (d *Docker) Private() bool { return d.eng != nil }

// NetnsPID is a process in the private engine's network namespace, for
// `nsenter -t PID -n` (0 for the user's engine).
func (d *Docker) NetnsPID() int {
	if d.eng == nil {
		return 0
	}
	return d.eng.holderPID()
}

// Command runs a program with DOCKER_HOST set, and for the private engine
// inside its network namespace, so that ports its containers publish on
// 127.0.0.1 (kind's API server, the registry) are reachable.
func (d *Docker) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	var cmd *exec.Cmd
	if d.eng != nil {
		cmd = exec.CommandContext(ctx, "nsenter", append([]string{"-t", fmt.Sprint(d.eng.holderPID()), "-n", "--", name}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, name, args...)
	}
	cmd.Env = append(append(os.Environ(), "DOCKER_HOST="+d.host), d.env...)
	return cmd
}

// Docker runs the docker CLI with args and returns its standard output; an
// error holds its standard error.
func (d *Docker) Docker(ctx context.Context, args ...string) (string, error) {
	cmd := d.Command(ctx, d.client, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// DialContext connects to addr as a program run by Command would: inside
// the private engine's network namespace (plain net.Dialer otherwise). Use
// it as an HTTP transport's DialContext to reach 127.0.0.1 ports published
// by containers from this process.
func (d *Docker) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if d.eng == nil {
		var dialer net.Dialer
		return dialer.DialContext(ctx, network, addr)
	}
	return dialInNetns(ctx, d.eng.holderPID(), network, addr)
}

// Stop removes the private engine: every container, dockerd and its
// containerd, its mounts, folder and cgroup parent; nothing of it keeps
// running. The user's engine is left alone.
func (d *Docker) Stop(ctx context.Context) error {
	if d.eng == nil {
		return nil
	}
	start := time.Now()
	if ids, err := d.Docker(ctx, "ps", "-aq"); err == nil && strings.TrimSpace(ids) != "" {
		if _, err := d.Docker(ctx, append([]string{"rm", "-f", "-v"}, strings.Fields(ids)...)...); err != nil {
			d.logf("removing containers: %v", err)
		}
	}
	err := d.eng.stop(ctx)
	d.logf("private docker engine stopped and removed in %v", time.Since(start).Round(time.Millisecond))
	return err
}
