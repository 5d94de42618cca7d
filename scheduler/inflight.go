package scheduler

// inFlight caps the handlers running at once across the session
// (max_in_flight; 0 is no cap). Waiters are served in arrival order: with
// k free slots only the first k waiters may take one, so a newcomer never
// overtakes a node that waited. Waiting is state (the waiters list), and a
// release names the waiters to wake.
type inFlight struct {
	max     int
	running int
	waiters []string
}

func (f *inFlight) position(node string) int {
	for i, w := range f.waiters {
		if w == node {
			return i
		}
	}
	return -1
}

// tryAcquire takes a slot for node, or queues it (once) and reports false.
func (f *inFlight) tryAcquire(node string) bool {
	if f.max <= 0 {
		f.running++
		return true
	}
	i := f.position(node)
	at := i
	if at < 0 {
		at = len(f.waiters)
	}
	if at < f.max-f.running {
		if i >= 0 {
			f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
		}
		f.running++
		return true
	}
	if i < 0 {
		f.waiters = append(f.waiters, node)
	}
	return false
}

// release gives a slot back.
func (f *inFlight) release() { f.running-- }

// remove drops node from the queue (it stopped or left the graph).
func (f *inFlight) remove(node string) {
	if i := f.position(node); i >= 0 {
		f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
	}
}

// wakeable lists the waiters that may take a free slot now.
func (f *inFlight) wakeable() []string {
	free := f.max - f.running
	if f.max <= 0 || free <= 0 || len(f.waiters) == 0 {
		return nil
	}
	if free > len(f.waiters) {
		free = len(f.waiters)
	}
	return append([]string(nil), f.waiters[:free]...)
}
