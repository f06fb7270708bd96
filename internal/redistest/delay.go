package redistest

// A delayed replication link, to widen the window a failover can lose
// (issue 32): on loopback a replica is microseconds behind its master,
// across a network a round trip. The proxy sits between a replica and its
// master and holds every chunk the master sends for a fixed time.

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// delayQueue is how many chunks one link holds at most; past it the link
// stops reading from the master, and TCP pushes back.
const delayQueue = 4096

// DelayProxy is a TCP proxy on a free loopback port to an upstream
// address. What the upstream sends reaches the client Delay after the
// proxy read it, in order and byte for byte; what the client sends is
// forwarded at once. When the upstream's connection ends, what the proxy
// still holds is dropped, not delivered: the link fails with the master,
// as when the master's host or its network goes, so the writes of the
// last Delay before a master dies are the ones its replicas never get.
type DelayProxy struct {
	// Delay is how long each chunk from the upstream is held.
	Delay    time.Duration
	upstream string
	ln       net.Listener
	wg       sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
}

// StartDelayProxy starts a proxy to upstream (host:port) that delays what
// upstream sends by d. It is closed when the test ends.
func StartDelayProxy(t testing.TB, upstream string, d time.Duration) *DelayProxy {
	t.Helper()
	// Port 0: the listener holds its port from the start, so no other
	// test can be handed it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("delay proxy: %v", err)
	}
	p := &DelayProxy{Delay: d, upstream: upstream, ln: ln, conns: map[net.Conn]bool{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port.
func (p *DelayProxy) Addr() string { return p.ln.Addr().String() }

// Port is the proxy's port.
func (p *DelayProxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines to end.
func (p *DelayProxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close() // ends its link's goroutines
	}
	p.mu.Unlock()
	_ = p.ln.Close() // ends accept
	p.wg.Wait()
}

// track adds c to the connections Close closes; it reports false (and
// closes c) once the proxy is closed.
func (p *DelayProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close() // too late: the proxy is closing
		return false
	}
	p.conns[c] = true
	return true
}

// untrack closes c and forgets it.
func (p *DelayProxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = c.Close() // the link is over
	delete(p.conns, c)
}

// accept serves each client connection until the listener is closed.
func (p *DelayProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Go(func() { p.serve(client) })
	}
}

// serve links client to a new connection to the upstream, until either
// side ends; then both are closed. An upstream that cannot be dialled (a
// dead master) closes the client at once, as a refused connection would.
func (p *DelayProxy) serve(client net.Conn) {
	if !p.track(client) {
		return
	}
	defer p.untrack(client)
	up, err := net.DialTimeout("tcp", p.upstream, time.Second)
	if err != nil {
		return
	}
	if !p.track(up) {
		return
	}
	defer p.untrack(up)
	var wg sync.WaitGroup
	wg.Go(func() {
		// The client's side is not delayed: a replica's acknowledgments
		// reach the master at once.
		_, _ = io.Copy(up, client) // ends with either side; both are then closed
		_ = up.Close()
		_ = client.Close()
	})
	delayLink(client, up, p.Delay)
	_ = up.Close()
	_ = client.Close()
	wg.Wait()
}

// chunk is what one read from the upstream returned, and when.
type chunk struct {
	b  []byte
	at time.Time
}

// delayLink copies src to dst, writing each chunk read from src d after it
// was read, in order. It returns when src ends (dropping the chunks it
// still holds, and closing src) or when a write to dst fails (then it
// closes src, so that its reader ends).
func delayLink(dst io.Writer, src io.ReadCloser, d time.Duration) {
	chunks := make(chan chunk, delayQueue)
	srcDone := make(chan struct{})
	dstDone := make(chan struct{})
	var reader sync.WaitGroup
	reader.Go(func() {
		defer close(srcDone)
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				c := chunk{b: bytes.Clone(buf[:n]), at: time.Now()}
				select {
				case chunks <- c:
				case <-dstDone:
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
	defer func() {
		close(dstDone)
		_ = src.Close() // unblocks the reader
		reader.Wait()
	}()
	for {
		var c chunk
		select {
		case c = <-chunks:
		case <-srcDone:
			return // what is held is dropped
		}
		if wait := time.Until(c.at.Add(d)); wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-timer.C:
			case <-srcDone:
				timer.Stop()
				return
			}
		}
		if _, err := dst.Write(c.b); err != nil {
			return
		}
	}
}
