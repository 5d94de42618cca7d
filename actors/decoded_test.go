package actors

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// What the intake decoded reaches the consumer's delivery of the same
// bytes once; other bytes under the same id (a publish the stream
// de-duplicated) decode again.
func TestDecodedTakenOnce(t *testing.T) {
	var c decodedCache
	env := &pb.Envelope{Id: "s.ext1"}
	c.put("s.ext1", []byte("one"), env)
	require.Nil(t, c.take("s.ext1", []byte("two")), "other bytes under the id")
	require.Nil(t, c.take("s.ext1", []byte("one")), "forgotten once asked for")

	c.put("s.ext2", []byte("one"), env)
	require.Same(t, env, c.take("s.ext2", []byte("one")))
	require.Nil(t, c.take("s.ext2", []byte("one")), "taken once")

	c.put("", []byte("one"), env)
	require.Nil(t, c.take("", []byte("one")), "no id, nothing kept")
}

// A session keeps at most two generations of decodedKeep envelopes: what
// no delivery takes goes with its generation.
func TestDecodedBounded(t *testing.T) {
	var c decodedCache
	env := &pb.Envelope{}
	data := []byte("x")
	for i := range decodedKeep + 1 {
		c.put(strconv.Itoa(i), data, env)
	}
	require.Same(t, env, c.take("0", data), "kept in the previous generation")
	for i := range decodedKeep {
		c.put("b"+strconv.Itoa(i), data, env)
	}
	require.Nil(t, c.take("1", data), "two generations later")
	require.LessOrEqual(t, len(c.cur)+len(c.prev), 2*decodedKeep)
}

// Large envelopes are not kept, and a generation holds no more than
// decodedKeepBytes: a flood of the largest envelopes an outside client may
// send does not pile up in the cache.
func TestDecodedBoundedInBytes(t *testing.T) {
	var c decodedCache
	env := &pb.Envelope{}
	c.put("big", make([]byte, decodedMaxBytes+1), env)
	require.Nil(t, c.take("big", make([]byte, decodedMaxBytes+1)), "too large to keep")
	data := make([]byte, decodedMaxBytes)
	n := 4 * decodedKeepBytes / len(data)
	for i := range n {
		c.put(strconv.Itoa(i), data, env)
	}
	held := 0
	for _, d := range c.cur {
		held += len(d.data)
	}
	for _, d := range c.prev {
		held += len(d.data)
	}
	require.LessOrEqual(t, held, 2*decodedKeepBytes, "two generations of bytes at most")
	require.Equal(t, c.curBytes, func() int {
		b := 0
		for _, d := range c.cur {
			b += len(d.data)
		}
		return b
	}(), "the count of bytes follows the generation")
	require.Same(t, env, c.take(strconv.Itoa(n-1), data), "the newest is kept")
}
