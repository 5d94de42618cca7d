package actors

import cmap "github.com/orcaman/concurrent-map"

// protoactor's process registry is 1,024 concurrent maps of
// concurrent-map's SHARD_COUNT shards each (32 by default): 32,768 maps
// and locks made by every actor system, which cost each session (and each
// child session) 3.3 ms and 2.9 MB before its first actor. The registry's
// 1,024 buckets already spread the actors' names; one shard per bucket
// makes a system in 0.08 ms and 124 KB. concurrent-map reads the count when
// it makes a map, and only protoactor's registry uses it in this program,
// so it is set before any is made: in the package's initialisation.
func init() { cmap.SHARD_COUNT = 1 }
