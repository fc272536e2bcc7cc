// Package docker is the docker sandbox backend: one long-lived container
// per scope, each run a `docker exec` of `conch sandbox-init` in it.
package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/conchsh/conch/internal/config"
	"github.com/conchsh/conch/internal/host/sandbox"
)

// Docker is the docker backend: one long-lived container
// per scope, runs through `docker exec -i … sandbox-init`.
type Docker struct {
	probe sandbox.Probe
}

// Name implements Backend.
func (d *Docker) Name() string { return "docker" }

// Available asks the engine for its version.
func (d *Docker) Available(ctx context.Context) error {
	return d.probe.Get(ctx, func() error {
		if _, err := exec.LookPath("docker"); err != nil {
			return errors.New("the docker client is not installed")
		}
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").CombinedOutput()
		if err != nil {
			return fmt.Errorf("no docker engine answers (%s)", firstLine(string(out)))
		}
		return nil
	})
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// ContainerName is conch-sbx-<slug(scope)>, at most 63 characters.
func ContainerName(scope string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(scope) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteRune(c)
		} else {
			b.WriteByte('-')
		}
	}
	n := "conch-sbx-" + b.String()
	if len(n) > 63 {
		n = n[:63]
	}
	return n
}

// ConfigHash hashes the effective settings of a container.
func ConfigHash(r *sandbox.Run) string {
	b, _ := json.Marshal(struct {
		S  any
		WS string
		X  string
	}{r.Settings, r.Workspace, r.Exe})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// createArgs is the `docker create` of a scope's container: read-only root,
// no capabilities, no new privileges, the gateway's uid, the limits.
func createArgs(r *sandbox.Run) []string {
	s := r.Settings
	name := ContainerName(s.Scope)
	a := []string{"create", "--name", name, "--label", "conch.sandbox=1", "--label", "conch.scope=" + s.Scope,
		"--label", "conch.createdAtMs=" + strconv.FormatInt(time.Now().UnixMilli(), 10), "--label", "conch.configHash=" + ConfigHash(r),
		"--read-only", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--tmpfs", "/run"}
	if s.Network == "open" {
		a = append(a, "--network", s.Docker.Network)
	} else {
		a = append(a, "--network", "none")
	}
	a = append(a, "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()))
	if s.Pids > 0 {
		a = append(a, "--pids-limit", strconv.FormatInt(s.Pids, 10))
	}
	if s.MemoryBytes > 0 {
		a = append(a, "--memory", strconv.FormatInt(s.MemoryBytes, 10))
	}
	if s.CPUs > 0 {
		a = append(a, "--cpus", strconv.FormatFloat(s.CPUs, 'f', -1, 64))
	}
	for _, u := range s.Docker.Ulimits {
		a = append(a, "--ulimit", u)
	}
	ws := r.Workspace + ":/workspace"
	if s.WorkspaceAccess == "ro" {
		ws += ":ro"
	}
	a = append(a, "--workdir", "/workspace", "-v", ws, "-v", filepath.Join(sandbox.ScopeDir(r.Home, s.Scope), "home")+":"+sandbox.InsideHome,
		"-v", r.Exe+":"+sandbox.InsideExe+":ro")
	for _, x := range s.Docker.Binds {
		a = append(a, "-v", x)
	}
	a = append(a, "-e", "HOME="+sandbox.InsideHome, "-e", "LANG=C.UTF-8")
	keys := make([]string, 0, len(s.Docker.Env))
	for k := range s.Docker.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		a = append(a, "-e", k+"="+s.Docker.Env[k])
	}
	return append(a, s.Docker.Image, "sleep", "infinity")
}

// List returns the conch containers.
func (d *Docker) List(ctx context.Context) ([]sandbox.Container, error) {
	out, err := exec.CommandContext(ctx, "docker", "ps", "-a", "--filter", "label=conch.sandbox=1", "--format", "{{json .}}").Output()
	if err != nil {
		return nil, fmt.Errorf("docker ps: %v", err)
	}
	var cs []sandbox.Container
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		var row struct{ Names, Labels, State, Status string }
		if json.Unmarshal([]byte(line), &row) != nil {
			continue
		}
		c := sandbox.Container{Name: row.Names, Running: row.State == "running", Status: row.Status}
		for _, kv := range strings.Split(row.Labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "conch.scope":
				c.Scope = v
			case "conch.configHash":
				c.ConfigHash = v
			case "conch.createdAtMs":
				c.CreatedAt, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// Prepare makes the scope home and ensures the container: reused when its
// config hash matches, else recreated.
func (d *Docker) Prepare(ctx context.Context, r *sandbox.Run) error {
	if err := os.MkdirAll(filepath.Join(sandbox.ScopeDir(r.Home, r.Settings.Scope), "home"), 0o700); err != nil {
		return err
	}
	name := ContainerName(r.Settings.Scope)
	cs, err := d.List(ctx)
	if err != nil {
		return err
	}
	for _, c := range cs {
		if c.Name != name {
			continue
		}
		if c.ConfigHash == ConfigHash(r) || c.Running {
			// A running container with an old config is kept (it may be
			// in use); `conch sandbox recreate` replaces it.
			if !c.Running {
				return dockerRun(ctx, "start", name)
			}
			return nil
		}
		if err := dockerRun(ctx, "rm", "-f", name); err != nil {
			return err
		}
	}
	if err := dockerRun(ctx, createArgs(r)...); err != nil {
		return err
	}
	if err := dockerRun(ctx, "start", name); err != nil {
		return err
	}
	if sc := r.Settings.Docker.SetupCommand; sc != "" {
		return dockerRun(ctx, "exec", "-i", name, "/bin/sh", "-lc", sc)
	}
	return nil
}

func dockerRun(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("docker %s: %v: %s", args[0], err, firstLine(string(out)))
	}
	return nil
}

// Remove removes the scope's container.
func (d *Docker) Remove(ctx context.Context, scope string) error {
	return dockerRun(ctx, "rm", "-f", ContainerName(scope))
}

// Prune removes containers idle or older than the settings allow; it
// returns the names removed. Docker does not record last use, so idle time
// is approximated by the container's age when it is stopped.
func (d *Docker) Prune(ctx context.Context, idle, maxAge time.Duration) ([]string, error) {
	cs, err := d.List(ctx)
	if err != nil {
		return nil, err
	}
	var gone []string
	now := time.Now().UnixMilli()
	for _, c := range cs {
		age := time.Duration(now-c.CreatedAt) * time.Millisecond
		if age > maxAge || !c.Running && age > idle {
			if err := dockerRun(ctx, "rm", "-f", c.Name); err == nil {
				gone = append(gone, c.Name)
			}
		}
	}
	return gone, nil
}

// Layers implements Backend.
func (d *Docker) Layers(r *sandbox.Run) []string {
	l := []string{"docker", "read-only-rootfs", "cap-drop-all", "no-new-privileges"}
	if r.Settings.Network != "open" {
		l = append(l, "network-none")
	}
	return l
}

// Command is `docker exec -i [-w dir] [-e K=V …] <name> sandbox-init …`.
func (d *Docker) Command(r *sandbox.Run) ([]string, []string, error) {
	view := sandbox.NewView(r.Workspace, r.Settings, "docker")
	cwd, ok := view.MapIn(r.Cwd)
	if !ok {
		cwd = view.Inside
	}
	bin, err := exec.LookPath("docker")
	if err != nil {
		return nil, nil, errors.New("the docker client is not installed")
	}
	a := []string{bin, "exec", "-i", "-w", cwd}
	for _, kv := range r.Env {
		if k, _, _ := strings.Cut(kv, "="); k != "HOME" {
			a = append(a, "-e", kv)
		}
	}
	a = append(a, ContainerName(r.Settings.Scope), sandbox.InsideExe, "sandbox-init")
	if r.PTY {
		// Never `docker exec -t`: the init allocates the PTY inside.
		a = append(a, "--pty")
	}
	a = append(a, "--", "/bin/sh", "-lc", r.Command)
	return a, []string{"PATH=" + sandbox.DefaultPath}, nil
}

// KillArgv is the prefix of the in-container kill the supervisor runs.
func (d *Docker) KillArgv(r *sandbox.Run) []string {
	bin, err := exec.LookPath("docker")
	if err != nil {
		bin = "docker"
	}
	return []string{bin, "exec", ContainerName(r.Settings.Scope), sandbox.InsideExe, "sandbox-init"}
}

// ContainerName implements sandbox.Containers.
func (d *Docker) ContainerName(scope string) string { return ContainerName(scope) }

var _ sandbox.Containers = (*Docker)(nil)

func init() {
	sandbox.Register("docker", sandbox.Factory{New: func(config.SandboxSettings) sandbox.Backend { return &Docker{} }})
}
