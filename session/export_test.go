package session

// SetJournalKeep changes JournalKeep and the compaction period for a test;
// the returned function restores them.
func SetJournalKeep(keep int, every uint64) (restore func()) {
	k, e := JournalKeep, compactEvery
	JournalKeep, compactEvery = keep, every
	return func() { JournalKeep, compactEvery = k, e }
}

// ArtifactSweeps is how many retention sweeps of its artifacts a durable
// session did, and how many objects they deleted.
func ArtifactSweeps(s *Session) (sweeps, deleted int64) {
	if s.sweep == nil {
		return 0, 0
	}
	return s.sweep.sweeps.Load(), s.sweep.deleted.Load()
}
