package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Sandbox is the "sandbox" section and agents.<id>.sandbox.
// Every field is optional; an agent's section overrides the global one key
// by key (lists and maps are replaced whole).
type Sandbox struct {
	Mode            string            `json:"mode,omitempty"`
	Backend         string            `json:"backend,omitempty"`
	Scope           string            `json:"scope,omitempty"`
	WorkspaceAccess string            `json:"workspaceAccess,omitempty"`
	WorkspacePath   string            `json:"workspacePath,omitempty"`
	Network         string            `json:"network,omitempty"`
	ProtectPaths    []string          `json:"protectPaths,omitempty"`
	GitAccess       string            `json:"gitAccess,omitempty"`
	RunAs           string            `json:"runAs,omitempty"`
	Env             map[string]string `json:"env,omitempty"`
	Bwrap           *SandboxBwrap     `json:"bwrap,omitempty"`
	Limits          *SandboxLimits    `json:"limits,omitempty"`
	Docker          *SandboxDocker    `json:"docker,omitempty"`
	// The kubernetes backend (kube.go).
	IdleTimeout string             `json:"idleTimeout,omitempty"`
	Kubernetes  *SandboxKubernetes `json:"kubernetes,omitempty"`
}

// SandboxBwrap is sandbox.bwrap. Binds are "SRC" or "SRC:DST".
type SandboxBwrap struct {
	Path    string   `json:"path,omitempty"`
	ROBinds []string `json:"roBinds,omitempty"`
	Binds   []string `json:"binds,omitempty"`
}

// SandboxLimits is sandbox.limits; nil fields are unset.
type SandboxLimits struct {
	MemoryBytes *int64   `json:"memoryBytes,omitempty"`
	Pids        *int64   `json:"pids,omitempty"`
	CPUs        *float64 `json:"cpus,omitempty"`
}

// SandboxDocker is sandbox.docker.
type SandboxDocker struct {
	Image        string            `json:"image,omitempty"`
	Network      string            `json:"network,omitempty"`
	Env          map[string]string `json:"env,omitempty"`
	Binds        []string          `json:"binds,omitempty"`
	Ulimits      []string          `json:"ulimits,omitempty"`
	SetupCommand string            `json:"setupCommand,omitempty"`
	Prune        *SandboxPrune     `json:"prune,omitempty"`
}

// SandboxPrune is sandbox.docker.prune.
type SandboxPrune struct {
	IdleHours  *float64 `json:"idleHours,omitempty"`
	MaxAgeDays *float64 `json:"maxAgeDays,omitempty"`
}

// SandboxSettings are an agent's resolved sandbox settings, defaults
// applied and enumerations lower-cased.
type SandboxSettings struct {
	Mode            string // off | all | non-main
	On              bool   // sandboxing is on for this agent
	Backend         string // auto | bwrap | docker | landlock
	Scope           string // agent-<id> | shared (the directory name)
	WorkspaceAccess string // rw | ro | none
	WorkspacePath   string // same | /workspace
	Network         string // none | open
	ProtectPaths    []string
	GitAccess       string // ro | rw: the workspace's git directories
	RunAsUID        int    // the uid:gid a root gateway runs bwrap commands as
	RunAsGID        int    // (0:0 keeps root)
	Env             map[string]string
	BwrapPath       string
	ROBinds         []string
	Binds           []string
	MemoryBytes     int64   // 0: unset
	Pids            int64   // 0: unset
	CPUs            float64 // 0: unset
	Docker          DockerSettings
	Kube            KubeSettings  // the kubernetes backend (kube.go)
	IdleTimeout     time.Duration // kubernetes: idle sandboxes are deleted (0: never)
}

// DockerSettings are the resolved sandbox.docker values.
type DockerSettings struct {
	Image        string
	Network      string
	Env          map[string]string
	Binds        []string
	Ulimits      []string
	SetupCommand string
	IdleHours    float64
	MaxAgeDays   float64
}

// DefaultProtectPaths is sandbox.protectPaths' default.
var DefaultProtectPaths = []string{".git/hooks", ".git/config", ".conch"}

// The allowed values of the sandbox's enumerated keys (validate, Schema).
var (
	sandboxModes          = []string{"off", "all", "non-main"}
	sandboxBackends       = []string{"auto", "bwrap", "docker", "landlock", "seatbelt", "kubernetes"}
	sandboxScopes         = []string{"agent", "shared"}
	workspaceAccessValues = []string{"rw", "ro", "none"}
	sandboxNetworks       = []string{"none", "open"}
	gitAccessValues       = []string{"ro", "rw"}
	workspacePaths        = []string{"same", "/workspace"} // case-sensitive
)

// sandboxBackendOS names the one OS (a GOOS value) a backend is built
// for; the others are built for every OS.
var sandboxBackendOS = map[string]string{"bwrap": "linux", "landlock": "linux", "seatbelt": "darwin"}

// SandboxBackendOS returns the OS the sandbox backend name is built for
// (a GOOS value), or "" when it is built for every OS. A configuration
// names a backend of another OS without error (the file may be shared);
// a sandboxed run there fails closed.
func SandboxBackendOS(name string) string { return sandboxBackendOS[name] }

// Limits of sandbox.limits that validate enforces.
const (
	minMemoryBytes = 1 << 20
	maxCPUs        = 1024
)

func (s *Sandbox) validate(prefix string) error {
	if s == nil {
		return nil
	}
	errs := []error{
		oneOf(prefix+".mode", s.Mode, sandboxModes...),
		oneOf(prefix+".backend", s.Backend, sandboxBackends...),
		oneOf(prefix+".scope", s.Scope, sandboxScopes...),
		oneOf(prefix+".workspaceAccess", s.WorkspaceAccess, workspaceAccessValues...),
		oneOf(prefix+".network", s.Network, sandboxNetworks...),
		oneOf(prefix+".gitAccess", s.GitAccess, gitAccessValues...),
	}
	if s.RunAs != "" {
		if _, _, err := ParseRunAs(s.RunAs); err != nil {
			errs = append(errs, fmt.Errorf("%s.runAs: %v", prefix, err))
		}
	}
	if s.WorkspacePath != "" && !slices.Contains(workspacePaths, s.WorkspacePath) {
		errs = append(errs, fmt.Errorf("%s.workspacePath: invalid value %q (want same or /workspace)", prefix, s.WorkspacePath))
	}
	for _, p := range s.ProtectPaths {
		if p == "" || strings.HasPrefix(p, "/") || strings.Contains("/"+p+"/", "/../") {
			errs = append(errs, fmt.Errorf("%s.protectPaths: %q must be a relative path inside the workspace", prefix, p))
		}
	}
	for k := range s.Env {
		if !envName(k) {
			errs = append(errs, fmt.Errorf("%s.env: invalid variable name %q", prefix, k))
		}
	}
	if b := s.Bwrap; b != nil {
		for _, l := range [][]string{b.ROBinds, b.Binds} {
			for _, x := range l {
				if err := checkBindSyntax(x); err != nil {
					errs = append(errs, fmt.Errorf("%s.bwrap: %w", prefix, err))
				}
			}
		}
	}
	if l := s.Limits; l != nil {
		if l.MemoryBytes != nil && *l.MemoryBytes < minMemoryBytes {
			errs = append(errs, fmt.Errorf("%s.limits.memoryBytes: %d is below 1 MiB", prefix, *l.MemoryBytes))
		}
		if l.Pids != nil && *l.Pids < 0 {
			errs = append(errs, fmt.Errorf("%s.limits.pids: %d is negative (0 means no limit)", prefix, *l.Pids))
		}
		if l.CPUs != nil && (*l.CPUs < 0 || *l.CPUs > maxCPUs) {
			errs = append(errs, fmt.Errorf("%s.limits.cpus: %v is out of range (0 means no limit)", prefix, *l.CPUs))
		}
	}
	if d := s.Docker; d != nil {
		for _, x := range d.Binds {
			if err := checkBindSyntax(strings.TrimSuffix(strings.TrimSuffix(x, ":ro"), ":rw")); err != nil {
				errs = append(errs, fmt.Errorf("%s.docker: %w", prefix, err))
			}
		}
	}
	errs = append(errs, validateIdle(prefix, s.IdleTimeout), s.Kubernetes.validate(prefix+".kubernetes"))
	return errors.Join(errs...)
}

func envName(k string) bool {
	if k == "" {
		return false
	}
	for i, c := range k {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// SplitBind splits "SRC" or "SRC:DST" into source and destination.
func SplitBind(b string) (src, dst string) {
	src, dst, ok := strings.Cut(b, ":")
	if !ok {
		dst = src
	}
	return src, dst
}

// The patterns of a bind that checkBindSyntax accepts, for Schema: an
// absolute source, optionally ":" and an absolute destination; docker's may
// end in :rw and/or :ro, which its check trims first.
const (
	bindPattern       = `^/[^:]*(?::/.*)?$`
	dockerBindPattern = `^/[^:]*(?::/.*)?(?::rw)?(?::ro)?$`
)

func checkBindSyntax(b string) error {
	src, dst := SplitBind(b)
	if !strings.HasPrefix(src, "/") || !strings.HasPrefix(dst, "/") {
		return fmt.Errorf("bind %q: source and destination must be absolute paths (SRC or SRC:DST)", b)
	}
	return nil
}

// SandboxFor resolves agent's sandbox settings: agents.<id>.sandbox key by
// key over the global section over the defaults (docs/configure.md,
// "Sandbox").
func (c *Config) SandboxFor(agent string) SandboxSettings {
	s := SandboxSettings{
		Mode: "off", Backend: "auto", Scope: "agent", WorkspaceAccess: "rw", WorkspacePath: "same",
		Network: "none", ProtectPaths: DefaultProtectPaths, GitAccess: "ro", RunAsUID: 65534, RunAsGID: 65534, Env: map[string]string{"LANG": "C.UTF-8"},
		BwrapPath: "bwrap", Pids: 512,
		Docker:      DockerSettings{Image: "debian:bookworm-slim", Network: "bridge", IdleHours: 24, MaxAgeDays: 7},
		Kube:        KubeSettings{ConchPath: DefaultKubeConchPath, SandboxCRD: "auto", StartupTimeout: DefaultKubeStartupTimeout, NodeLostGrace: DefaultKubeNodeLostGrace},
		IdleTimeout: DefaultIdleTimeout,
	}
	apply := func(x *Sandbox) {
		if x == nil {
			return
		}
		str := func(dst *string, v string) {
			if v != "" {
				*dst = strings.ToLower(v)
			}
		}
		str(&s.Mode, x.Mode)
		str(&s.Backend, x.Backend)
		str(&s.Scope, x.Scope)
		str(&s.WorkspaceAccess, x.WorkspaceAccess)
		str(&s.Network, x.Network)
		if x.WorkspacePath != "" {
			s.WorkspacePath = x.WorkspacePath
		}
		if x.ProtectPaths != nil {
			s.ProtectPaths = x.ProtectPaths
		}
		str(&s.GitAccess, x.GitAccess)
		if u, g, err := ParseRunAs(x.RunAs); x.RunAs != "" && err == nil {
			s.RunAsUID, s.RunAsGID = u, g
		}
		if x.Env != nil {
			s.Env = maps.Clone(x.Env)
		}
		if b := x.Bwrap; b != nil {
			if b.Path != "" {
				s.BwrapPath = b.Path
			}
			if b.ROBinds != nil {
				s.ROBinds = b.ROBinds
			}
			if b.Binds != nil {
				s.Binds = b.Binds
			}
		}
		if l := x.Limits; l != nil {
			if l.MemoryBytes != nil {
				s.MemoryBytes = *l.MemoryBytes
			}
			if l.Pids != nil {
				s.Pids = *l.Pids
			}
			if l.CPUs != nil {
				s.CPUs = *l.CPUs
			}
		}
		if d := x.Docker; d != nil {
			if d.Image != "" {
				s.Docker.Image = d.Image
			}
			if d.Network != "" {
				s.Docker.Network = d.Network
			}
			if d.Env != nil {
				s.Docker.Env = d.Env
			}
			if d.Binds != nil {
				s.Docker.Binds = d.Binds
			}
			if d.Ulimits != nil {
				s.Docker.Ulimits = d.Ulimits
			}
			if d.SetupCommand != "" {
				s.Docker.SetupCommand = d.SetupCommand
			}
			if p := d.Prune; p != nil {
				if p.IdleHours != nil {
					s.Docker.IdleHours = *p.IdleHours
				}
				if p.MaxAgeDays != nil {
					s.Docker.MaxAgeDays = *p.MaxAgeDays
				}
			}
		}
		s.applyKube(x)
	}
	apply(&c.Sandbox)
	if a, ok := c.Agents[agent]; ok {
		apply(a.Sandbox)
	}
	s.On = s.Mode == "all" || s.Mode == "non-main" && agent != "main"
	if s.Scope == "shared" {
		s.Scope = "shared"
	} else {
		s.Scope = "agent-" + agent
	}
	return s
}

// ParseRunAs reads sandbox.runAs: "UID" or "UID:GID" (numbers; GID
// defaults to UID).
func ParseRunAs(v string) (uid, gid int, err error) {
	us, gs, ok := strings.Cut(v, ":")
	if !ok {
		gs = us
	}
	uid, err1 := strconv.Atoi(us)
	gid, err2 := strconv.Atoi(gs)
	if err1 != nil || err2 != nil || uid < 0 || gid < 0 || uid > 1<<31-2 || gid > 1<<31-2 {
		return 0, 0, fmt.Errorf("invalid value %q (want UID or UID:GID, numbers)", v)
	}
	return uid, gid, nil
}
