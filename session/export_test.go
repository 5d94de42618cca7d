package session

// SetJournalKeep changes JournalKeep and the compaction period for a test;
// the returned function restores them.
func SetJournalKeep(keep int, every uint64) (restore func()) {
	k, e := JournalKeep, compactEvery
	JournalKeep, compactEvery = keep, every
	return func() { JournalKeep, compactEvery = k, e }
}
