package brokertest

import "go.uber.org/goleak"

// LeakOptions are what goleak must ignore in the packages whose tests kill
// servers of a Cluster. nats-server v2.15.2 can create a stream's file
// store while it shuts down (a stream assignment applied after its
// streams were stopped: processClusterCreateStream's addStream succeeds,
// and only its failure is checked against the shutdown), and that store's
// flush loop and its access-time registration outlive Shutdown. Seen once
// in six runs of session's TestClusterReplicas. Only these two goroutines
// are ignored: a server the tests leak whole still shows by its others.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*fileStore).flushStreamStateLoop"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server/ats.Register.func1"),
	}
}
