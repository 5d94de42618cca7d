package session

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestClaimDeleteAgainstStoring: a sweep may delete an object of a firing
// only while the firing does not store objects (again: a firing run anew
// after a restart, under the same number), and a firing that starts storing
// while a sweep deletes its earlier objects waits for the deletion, so the
// sweep never deletes the new version.
func TestClaimDeleteAgainstStoring(t *testing.T) {
	j := &journal{}
	_ = j.numbered()

	release, ok := j.claimDelete("w/3/response.md")
	require.True(t, ok, "no firing stores: the sweep may delete")
	stored := make(chan struct{})
	go func() { j.storing("w", 3); close(stored) }()
	select {
	case <-stored:
		t.Fatal("the firing stored while the sweep deleted its earlier object")
	case <-time.After(50 * time.Millisecond): // proving a wait: nothing to wait on but time
	}
	release()
	select {
	case <-stored:
	case <-time.After(10 * time.Second):
		t.Fatal("the firing still waits after the deletion")
	}
	_, ok = j.claimDelete("w/3/response.md")
	require.False(t, ok, "the firing stores anew: its object is not deleted")
	_, ok = j.claimDelete("w/4/response.md")
	require.True(t, ok, "another firing's")
	_, ok = j.claimDelete("inbox/e1/report.md")
	require.True(t, ok, "an outside upload has no firing")

	// Once its record is numbered, and a sweep read the numbering, the
	// firing's objects are judged again (by that sweep's generation).
	j.mu.Lock()
	delete(j.making, firingKey{"w", 3})
	j.mu.Unlock()
	at := j.numbered()
	require.True(t, at.remade["w/3/"], "the sweep forgets what it saw of w/3 before")
	_, ok = j.claimDelete("w/3/response.md")
	require.True(t, ok)
}
