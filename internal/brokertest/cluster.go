package brokertest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Cluster is a NATS cluster of in-process servers with routes between
// them and clustered JetStream (each server its own store), for tests of
// replication and of the loss of a server.
type Cluster struct {
	t     testing.TB
	mu    sync.Mutex
	opts  []*server.Options
	srvs  []*server.Server
	names []string
}

// FreePort is a loopback port nobody listens on now, below the kernel's
// ephemeral port range. A cluster's server that Kill stops listens again
// on the same port at Restart; a port of the ephemeral range may be taken
// meanwhile as the local port of an outgoing connection — among them the
// redials of the killed server by its peers and clients, one of which
// may connect to itself (a TCP self-connect) — and the restarted server
// then cannot listen (ReadyForConnections gave up after 20 s). No
// outgoing connection gets a port below the range. A test that stops and
// starts a server of its own on one port takes it from here too.
func FreePort(t testing.TB) int {
	t.Helper()
	const base = 10000
	lo := ephemeralLow()
	for range 1000 {
		p := base + rand.IntN(lo-base)
		if _, taken := givenPorts.LoadOrStore(p, true); taken {
			continue // another cluster of this process has it
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		return p
	}
	t.Fatalf("brokertest: no free port below %d", lo)
	return 0
}

// givenPorts are the ports FreePort gave out (a killed server's port
// must not go to another cluster while it is down).
var givenPorts sync.Map

// ephemeralLow is the first port of the kernel's ephemeral range (Linux;
// 32768 where it cannot be read).
func ephemeralLow() int {
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 11000 {
				return n
			}
		}
	}
	return 32768
}

// StartCluster starts n servers (3 for JetStream R3) with fixed loopback
// client and route ports, waits until JetStream has a meta leader, and
// shuts them down when the test ends. With n = 1 it is one outside server
// without a cluster (JetStream not clustered), which a test can Kill and
// Restart on its port and store while its clients stay up.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	routePorts := make([]int, n)
	for i := range routePorts {
		routePorts[i] = FreePort(t)
	}
	dir := t.TempDir()
	for i := 0; i < n; i++ {
		var routes []*url.URL
		for k, p := range routePorts {
			if k != i {
				routes = append(routes, &url.URL{Scheme: "nats-route", Host: "127.0.0.1:" + strconv.Itoa(p)})
			}
		}
		name := fmt.Sprintf("n%d", i+1)
		c.names = append(c.names, name)
		o := &server.Options{
			ServerName: name, Host: "127.0.0.1", Port: FreePort(t), NoSigs: true, NoLog: true,
			JetStream: true, StoreDir: filepath.Join(dir, name),
		}
		if n > 1 {
			o.Cluster = server.ClusterOpts{Name: "sy", Host: "127.0.0.1", Port: routePorts[i]}
			o.Routes = routes
		}
		c.opts = append(c.opts, o)
		c.srvs = append(c.srvs, nil)
	}
	for i := range c.opts {
		c.start(i)
	}
	t.Cleanup(func() {
		for i := range c.srvs {
			c.Kill(i)
		}
	})
	c.WaitReady()
	return c
}

func (c *Cluster) start(i int) {
	c.t.Helper()
	o := *c.opts[i]
	srv, err := server.NewServer(&o)
	if err != nil {
		c.t.Fatalf("brokertest: server %s: %v", c.names[i], err)
	}
	srv.Start()
	if !srv.ReadyForConnections(20 * time.Second) {
		c.t.Fatalf("brokertest: server %s not ready", c.names[i])
	}
	c.mu.Lock()
	c.srvs[i] = srv
	c.mu.Unlock()
}

// URL is the client URLs of every server, comma-separated (what --nats
// takes).
func (c *Cluster) URL() string {
	urls := make([]string, len(c.opts))
	for i, o := range c.opts {
		urls[i] = "nats://127.0.0.1:" + strconv.Itoa(o.Port)
	}
	return strings.Join(urls, ",")
}

// Server is server i (nil while it is down).
func (c *Cluster) Server(i int) *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.srvs[i]
}

// Index is the index of the server named name, or -1.
func (c *Cluster) Index(name string) int {
	for i, n := range c.names {
		if n == name {
			return i
		}
	}
	return -1
}

// Kill shuts server i down (its store stays for Restart).
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	srv := c.srvs[i]
	c.srvs[i] = nil
	c.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// Restart starts server i again on its ports and store.
func (c *Cluster) Restart(i int) { c.start(i) }

// WaitReady waits until every running server is current with a JetStream
// meta leader and that leader can place replicas on every running server
// (one server alone: until it runs JetStream).
func (c *Cluster) WaitReady() {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for len(c.srvs) == 1 {
		if srv := c.Server(0); srv != nil && srv.JetStreamEnabled() {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("brokertest: the server runs no JetStream")
		}
		time.Sleep(50 * time.Millisecond) // polling the server's state
	}
	for {
		ready := true
		for i := range c.srvs {
			if srv := c.Server(i); srv != nil && (!srv.JetStreamIsClustered() || !srv.JetStreamIsCurrent()) {
				ready = false
			}
		}
		if ready && c.placeable() {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("brokertest: no JetStream meta leader able to place replicas on every server")
		}
		time.Sleep(50 * time.Millisecond) // polling the servers' state
	}
}

// placeable reports whether there is a meta leader and it can place an
// asset on every running server: it has current statistics of each. A
// leader elected a moment ago may not have heard from its peers yet, and
// refuses an R3 stream with "no suitable peers for placement" until it has.
func (c *Cluster) placeable() bool {
	running := 0
	var leader *server.Server
	for i := range c.srvs {
		if srv := c.Server(i); srv != nil {
			running++
			if srv.JetStreamIsLeader() {
				leader = srv
			}
		}
	}
	return leader != nil && len(leader.JetStreamClusterPeers()) >= running
}

// HostPort is server i's client address, host:port (for a Proxy).
func (c *Cluster) HostPort(i int) string {
	return "127.0.0.1:" + strconv.Itoa(c.opts[i].Port)
}
