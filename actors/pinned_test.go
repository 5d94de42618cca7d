package actors

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A pinned runner runs what it is given in order on a goroutine that ends
// when nothing is left; inline (while spawn starts an actor) it runs on the
// caller's goroutine, and what that schedules runs after it, in order.
func TestPinned(t *testing.T) {
	var wg sync.WaitGroup
	pool := &warmPool{wg: &wg}
	p := &pinned{pool: pool}
	var mu sync.Mutex
	var got []int
	add := func(i int) func() {
		return func() {
			mu.Lock()
			got = append(got, i)
			mu.Unlock()
		}
	}

	p.setInline(true)
	ran := false
	p.Schedule(func() {
		add(1)()
		ran = true
		p.Schedule(add(2)) // queued behind the inline one
		p.Schedule(add(3))
	})
	require.True(t, ran, "run before Schedule returned")
	p.setInline(false)
	fourth := make(chan struct{})
	p.Schedule(func() { add(4)(); close(fourth) })
	select {
	case <-fourth:
	case <-time.After(10 * time.Second):
		t.Fatal("the queued work never ran")
	}
	pool.close()
	wg.Wait() // every goroutine of the pool ended
	require.Equal(t, []int{1, 2, 3, 4}, got)

	p.stop()
	p.Schedule(add(5))
	require.Equal(t, []int{1, 2, 3, 4}, got, "dropped after stop")
}
