package brokertest

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
)

// Proxy forwards TCP connections from clients to a NATS server, and can
// lose what the server sends on the way, as a network that fails does:
// the one fault a test cannot get from a real server on demand is a
// message the server sent (and counts as delivered) that never reached
// its client. The server and the clients are real; only the wire between
// them is in the test's hands.
type Proxy struct {
	t      testing.TB
	l      net.Listener
	target string
	wg     sync.WaitGroup

	mu      sync.Mutex
	conns   map[*proxied]struct{}
	drop    []byte        // DropNext: the reply prefix of the next message to drop
	dropped chan struct{} // closed when it is dropped
	lost    []byte        // Lose: the reply prefix of a message whose loss is told
	losing  chan struct{} // closed when one is lost
	done    chan struct{}
}

// proxied is one client's connection and its server side.
type proxied struct {
	client, server net.Conn
	lose           bool // Lose: what the server sends is dropped
}

// StartProxy listens on a loopback port and forwards each connection to
// the server at target (host:port). It is closed, with its connections,
// when the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("brokertest: proxy: %v", err)
	}
	p := &Proxy{t: t, l: l, target: target, conns: map[*proxied]struct{}{}, done: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// URL is the proxy's client URL.
func (p *Proxy) URL() string { return "nats://" + p.l.Addr().String() }

// Lose makes the connections open now lose everything the server sends
// them from here on (their clients hear nothing, the server notices
// nothing), until Cut closes them. Connections made later are not
// affected. The channel it returns is closed when one of them has lost a
// message (MSG or HMSG) whose reply subject starts with prefix: what the
// server sent is gone for sure then, which the server's own count of what
// it sent does not tell (it counts a message before it is written out,
// and one written out after Cut reaches the client's new connection).
func (p *Proxy) Lose(prefix string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.lose = true
	}
	p.lost, p.losing = []byte(prefix), make(chan struct{})
	return p.losing
}

// Cut closes every connection open now, both ways: their clients
// reconnect (through the proxy again, which forwards the new connections
// whole).
func (p *Proxy) Cut() {
	p.mu.Lock()
	conns := make([]*proxied, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.client.Close()
		c.server.Close()
	}
}

// DropNext drops the next message (MSG or HMSG) the server sends to any
// client whose reply subject starts with prefix — once; the connection
// stays up and everything else passes. A JetStream delivery's reply is
// its acknowledgement subject ($JS.ACK.<stream>.<consumer>....). The
// channel it returns is closed when the message is dropped.
func (p *Proxy) DropNext(prefix string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop, p.dropped = []byte(prefix), make(chan struct{})
	return p.dropped
}

func (p *Proxy) close() {
	close(p.done)
	p.l.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.l.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		c := &proxied{client: client, server: server}
		p.mu.Lock()
		select {
		case <-p.done:
			p.mu.Unlock()
			client.Close()
			server.Close()
			return
		default:
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { // client to server: everything
			defer p.wg.Done()
			_, _ = io.Copy(server, client)
			server.Close()
			client.Close()
		}()
		go func() { // server to client: message by message
			defer p.wg.Done()
			p.fromServer(c)
			server.Close()
			client.Close()
			p.mu.Lock()
			delete(p.conns, c)
			p.mu.Unlock()
		}()
	}
}

// fromServer forwards what the server sends, one protocol operation at a
// time (a line, and a message's payload with it), so that a whole message
// can be dropped.
func (p *Proxy) fromServer(c *proxied) {
	r := bufio.NewReaderSize(c.server, 64<<10)
	w := bufio.NewWriterSize(c.client, 64<<10)
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return
		}
		op := append([]byte(nil), line...)
		size, reply := payloadOf(op)
		var payload []byte
		if size >= 0 {
			payload = make([]byte, size+2) // and its CRLF
			if _, err := io.ReadFull(r, payload); err != nil {
				return
			}
		}
		p.mu.Lock()
		lose := c.lose
		if lose && p.lost != nil && reply != nil && bytes.HasPrefix(reply, p.lost) {
			p.lost = nil
			close(p.losing)
		}
		if !lose && p.drop != nil && reply != nil && bytes.HasPrefix(reply, p.drop) {
			lose, p.drop = true, nil
			close(p.dropped)
		}
		p.mu.Unlock()
		if lose {
			continue
		}
		if _, err := w.Write(op); err != nil {
			return
		}
		if _, err := w.Write(payload); err != nil {
			return
		}
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
}

// payloadOf is, for a MSG or HMSG line, the size of the payload that
// follows it and its reply subject (nil when none); -1 for other
// operations.
func payloadOf(line []byte) (int, []byte) {
	f := bytes.Fields(line)
	if len(f) == 0 {
		return -1, nil
	}
	var reply []byte
	switch string(bytes.ToUpper(f[0])) {
	case "MSG": // MSG subject sid [reply] size
		if len(f) == 5 {
			reply = f[3]
		}
	case "HMSG": // HMSG subject sid [reply] hsize size
		if len(f) == 6 {
			reply = f[3]
		}
	default:
		return -1, nil
	}
	n, err := strconv.Atoi(string(f[len(f)-1]))
	if err != nil {
		return -1, nil
	}
	return n, reply
}
