package cluster

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// DelayProxy is a TCP proxy that adds a fixed latency to each direction of
// every connection, to make a loopback etcd answer as one on disks and
// across a network would (see Options.EtcdDelay). It delays, it does not
// throttle: every chunk read is stamped and written out Delay later, in
// order, while the next chunks are already being read, so a stream of
// pipelined requests (etcd's gRPC streams many on one connection) is not
// serialized by the delay. StartUnixDelayProxy does the same between two
// unix sockets: in front of a CSI driver, every call takes twice the delay
// longer (test/upgrade's slow driver).
type DelayProxy struct {
	// Addr is where the proxy listens (127.0.0.1:port, or the unix
	// socket's path).
	Addr string

	// network is the target's: "tcp" or "unix".
	network string
	target  string
	delay   time.Duration
	ln      net.Listener
	wg      sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// StartDelayProxy listens on a free loopback port and forwards each
// connection to target with delay added each way. Close stops it.
func StartDelayProxy(target string, delay time.Duration) (*DelayProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return serveDelayProxy(ln, "tcp", target, delay), nil
}

// StartUnixDelayProxy listens on the unix socket socket and forwards each
// connection to the unix socket target with delay added each way. A gRPC
// call through it (a CSI driver's) takes twice delay longer, and calls
// made at once stay at once. Close stops it.
func StartUnixDelayProxy(socket, target string, delay time.Duration) (*DelayProxy, error) {
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return nil, err
	}
	return serveDelayProxy(ln, "unix", target, delay), nil
}

func serveDelayProxy(ln net.Listener, network, target string, delay time.Duration) *DelayProxy {
	p := &DelayProxy{Addr: ln.Addr().String(), network: network, target: target, delay: delay, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.serve)
	return p
}

// Close stops listening, cuts every connection and waits for the
// proxy's goroutines.
func (p *DelayProxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

// track registers a connection so that Close cuts it; false once closed.
func (p *DelayProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *DelayProxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
		c.Close()
	}
}

func (p *DelayProxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() {
			server, err := net.Dial(p.network, p.target)
			if err != nil {
				client.Close()
				return
			}
			if !p.track(client, server) {
				client.Close()
				server.Close()
				return
			}
			defer p.untrack(client, server)
			var both sync.WaitGroup
			both.Go(func() { p.pipe(server, client) })
			both.Go(func() { p.pipe(client, server) })
			both.Wait()
		})
	}
}

// chunk is bytes read from one side, due on the other side at due.
type chunk struct {
	data []byte
	due  time.Time
}

// pipe copies src to dst, each chunk delayed. When src ends, dst's write
// side is closed after the last chunk; when either fails, both connections
// are closed, which ends the other direction too.
func (p *DelayProxy) pipe(dst, src net.Conn) {
	queue := make(chan chunk, 1024)
	var writer sync.WaitGroup
	writer.Go(func() {
		var pending *chunk // read from the queue, not yet due
		for {
			var c chunk
			if pending != nil {
				c, pending = *pending, nil
			} else {
				var ok bool
				if c, ok = <-queue; !ok {
					break
				}
			}
			if wait := time.Until(c.due); wait > 0 {
				time.Sleep(wait)
			}
			// Everything else that is due by now goes in the same write
			// (one writev instead of a wake-up and a write per chunk).
			out := net.Buffers{c.data}
		more:
			for {
				select {
				case next, ok := <-queue:
					if !ok {
						break more
					}
					if next.due.After(time.Now()) {
						pending = &next
						break more
					}
					out = append(out, next.data)
				default:
					break more
				}
			}
			if _, err := out.WriteTo(dst); err != nil {
				src.Close()
				dst.Close()
				for range queue { // let the reader finish
				}
				return
			}
		}
		if half, ok := dst.(interface{ CloseWrite() error }); ok { // TCP and unix
			_ = half.CloseWrite()
		}
	})
	buf := make([]byte, 64*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			queue <- chunk{data: append([]byte(nil), buf[:n]...), due: time.Now().Add(p.delay)}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				dst.Close()
			}
			break
		}
	}
	close(queue)
	writer.Wait()
}
