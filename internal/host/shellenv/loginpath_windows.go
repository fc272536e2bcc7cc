package shellenv

import (
	"errors"
	"time"

	"golang.org/x/sys/windows/registry"
)

// LoginProbe is the PATH a fresh logon of this user would have: Windows
// has no login shell, and a process's PATH is the registry's as it was
// when its ancestor logged on (a service or a long-lived terminal keeps
// a stale one). So the "probe" reads the machine's and the user's Path
// from the registry (REG_EXPAND_SZ expanded) and joins them as logon
// does (loginRegistryPATH). It is quick, so it is done at once and never
// cached. Not yet run on Windows.
type LoginProbe struct {
	done chan struct{}
	path string
	err  error
}

// Registry keys of the system and user environments.
const (
	machineEnvKey = `SYSTEM\CurrentControlSet\Control\Session Manager\Environment`
	userEnvKey    = `Environment`
)

// StartLoginProbe reads the logon PATH from the registry; cacheFiles are
// not used on Windows (the registry is quicker than a cache file).
func StartLoginProbe(cacheFiles ...string) *LoginProbe {
	p := &LoginProbe{done: make(chan struct{})}
	machine, merr := registryPath(registry.LOCAL_MACHINE, machineEnvKey)
	user, uerr := registryPath(registry.CURRENT_USER, userEnvKey)
	p.path = loginRegistryPATH(machine, user)
	if p.path == "" {
		p.err = errors.Join(errors.New("no Path in the registry's environment"), merr, uerr)
	}
	close(p.done)
	return p
}

// registryPath is the Path value of key under root, expanded.
func registryPath(root registry.Key, key string) (string, error) {
	k, err := registry.OpenKey(root, key, registry.QUERY_VALUE)
	if err != nil {
		return "", err
	}
	defer k.Close()
	v, typ, err := k.GetStringValue("Path")
	if err != nil {
		return "", err
	}
	if typ == registry.EXPAND_SZ {
		if x, err := registry.ExpandString(v); err == nil {
			v = x
		}
	}
	return v, nil
}

// Stop does nothing: the result is known from the start.
func (p *LoginProbe) Stop() {}

// Done is closed when the result is known (at once).
func (p *LoginProbe) Done() <-chan struct{} { return p.done }

// Result returns the logon PATH and the error reading it.
func (p *LoginProbe) Result() (path string, ok bool, err error) { return p.path, true, p.err }

// Wait returns the result, which is known at once.
func (p *LoginProbe) Wait(d time.Duration) (path string, ok bool, err error) { return p.Result() }

// Cached is false: the result is never cached.
func (p *LoginProbe) Cached() bool { return false }

// UserLoginCache is "": the logon PATH is not cached on Windows.
func UserLoginCache() string { return "" }
