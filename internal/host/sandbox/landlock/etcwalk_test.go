//go:build linux

package landlock

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestEtcCacheFollowsEveryChange: a root landlock run reads only what
// the cached /etc walk grants, so the cache must never answer for a tree
// that changed. Each change below is made after the cache holds a kept
// walk (a hit proves it), and the next answer must equal a fresh walk.
func TestEtcCacheFollowsEveryChange(t *testing.T) {
	old := etcRacy
	etcRacy = 50 * time.Millisecond // longer than any kernel tick
	t.Cleanup(func() { etcRacy = old })
	d := t.TempDir()
	os.Chmod(d, 0o755)
	p := func(s ...string) string { return filepath.Join(append([]string{d}, s...)...) }
	os.MkdirAll(p("open", "deep"), 0o755)
	os.WriteFile(p("open", "deep", "f"), nil, 0o644)
	os.MkdirAll(p("mixed"), 0o755)
	os.WriteFile(p("mixed", "pub"), nil, 0o644)
	os.WriteFile(p("mixed", "secret"), nil, 0o600)
	os.MkdirAll(p("private"), 0o700)
	os.Symlink(p("mixed", "secret"), p("link"))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	changes := []struct {
		name string
		do   func()
	}{
		{"chmod-file-closed", func() { must(os.Chmod(p("open", "deep", "f"), 0o600)) }},
		{"chmod-file-open", func() { must(os.Chmod(p("open", "deep", "f"), 0o644)) }},
		{"add-closed-file", func() { must(os.WriteFile(p("open", "new"), nil, 0o600)) }},
		{"remove-closed-file", func() { must(os.Remove(p("open", "new"))) }},
		{"chmod-dir-open", func() { must(os.Chmod(p("private"), 0o755)) }},
		{"chmod-dir-closed", func() { must(os.Chmod(p("private"), 0o700)) }},
		{"add-closed-dir-deep", func() { must(os.Mkdir(p("open", "deep", "x"), 0o700)) }},
		{"retarget-link", func() { must(os.Remove(p("link"))); must(os.Symlink(p("mixed", "pub"), p("link"))) }},
		{"chmod-link-target", func() { must(os.Chmod(p("mixed", "pub"), 0o600)) }},
		{"rename-over", func() {
			must(os.WriteFile(p("mixed", "tmp"), nil, 0o644))
			must(os.Rename(p("mixed", "tmp"), p("mixed", "secret")))
		}},
		{"chown-dir", func() {
			if os.Geteuid() == 0 {
				must(os.Chown(p("private"), 65534, 65534))
			}
		}},
	}
	sorted := func(r EtcRules) EtcRules {
		slices.Sort(r.Dirs)
		slices.Sort(r.Files)
		slices.Sort(r.Listed)
		return r
	}
	for _, c := range changes {
		// Wait for a kept walk: one that started etcRacy after the last change.
		deadline := time.Now().Add(30 * time.Second)
		for {
			etcCache.Lock()
			h := etcCache.hits
			etcCache.Unlock()
			cachedEtcReadable(d)
			etcCache.Lock()
			hit := etcCache.hits > h
			etcCache.Unlock()
			if hit {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the cache never kept a walk", c.name)
			}
			time.Sleep(10 * time.Millisecond)
		}
		before := sorted(cachedEtcReadable(d))
		c.do()
		got, want := sorted(cachedEtcReadable(d)), sorted(etcReadable(d, nil))
		if !slices.Equal(got.Dirs, want.Dirs) || !slices.Equal(got.Files, want.Files) || !slices.Equal(got.Listed, want.Listed) {
			t.Errorf("%s: cached %+v, fresh walk %+v", c.name, got, want)
		}
		if c.name != "chown-dir" && slices.Equal(before.Dirs, want.Dirs) && slices.Equal(before.Files, want.Files) && slices.Equal(before.Listed, want.Listed) {
			t.Errorf("%s: the change did not change the answer, so the case tests nothing", c.name)
		}
	}
}

// TestEtcStampOfProc: /etc/mtab leads into /proc, whose inodes differ
// per process and are made again at will; the cache must not take that
// for a change of /etc, or it would walk on every run.
func TestEtcStampOfProc(t *testing.T) {
	a := stampOf(os.Stat("/proc/self/mounts"))
	b := stampOf(os.Stat("/proc/1/mounts"))
	if a.err || b.err {
		t.Skip("no /proc here")
	}
	if a != b {
		t.Fatalf("two processes' mounts files stamp differently: %+v %+v", a, b)
	}
}
