package engine

// Session ids, directories and their reuse are kept by
// registry.DirPool (e.dirs); these are the engine's uses of it.

// newID reserves a session id and its new, empty directory.
func (e *Engine) newID() (string, string, error) { return e.dirs.Reserve() }

// removeSession deletes s's directory (pooled for reuse), after telling
// its shared supervisor, which then writes nothing more there.
func (e *Engine) removeSession(s *session) error {
	s.mu.Lock()
	release := s.release
	s.mu.Unlock()
	e.forgetDamage(s.dir)
	return e.dirs.Remove(s.id, s.dir, release)
}
