package cluster

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// echoServer answers every byte it reads with the same byte, on TCP.
func echoServer(t *testing.T) string {
	return echoOn(t, "tcp", "127.0.0.1:0")
}

// echoOn listens on network and address, answers every byte it reads with
// the same byte until the test ends, and returns the address.
func echoOn(t *testing.T, network, address string) string {
	t.Helper()
	ln, err := net.Listen(network, address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func dialProxy(t *testing.T, delay time.Duration) (*DelayProxy, net.Conn) {
	t.Helper()
	p, err := StartDelayProxy(echoServer(t), delay)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return p, c
}

func TestDelayProxyRoundTripTakesTwiceTheDelay(t *testing.T) {
	const delay = 30 * time.Millisecond
	_, c := dialProxy(t, delay)
	got := make([]byte, 5)
	for range 3 {
		start := time.Now()
		if _, err := c.Write([]byte("hello")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatal(err)
		}
		rtt := time.Since(start)
		if string(got) != "hello" {
			t.Fatalf("echo %q, want hello", got)
		}
		if rtt < 2*delay {
			t.Fatalf("round trip %s, want at least %s", rtt, 2*delay)
		}
	}
}

// Requests sent one after another without waiting for their answers (as
// gRPC streams share a connection) each take the delay, not the sum of the
// delays before them.
func TestDelayProxyDoesNotSerializePipelinedChunks(t *testing.T) {
	const delay, messages, gap = 50 * time.Millisecond, 20, 5 * time.Millisecond
	_, c := dialProxy(t, delay)
	start := time.Now()
	go func() {
		for i := range messages {
			_, _ = c.Write([]byte{byte(i)})
			time.Sleep(gap)
		}
	}()
	got := make([]byte, messages)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	for i, b := range got {
		if int(b) != i {
			t.Fatalf("byte %d is %d: out of order", i, b)
		}
	}
	// Serialized it would take messages*2*delay (2 s); pipelined, the last
	// message's send time plus one round trip.
	if limit := messages*gap + 2*delay + 250*time.Millisecond; elapsed > limit {
		t.Fatalf("%d pipelined messages took %s, want under %s", messages, elapsed, limit)
	}
}

func TestDelayProxyCarriesLargeStreamsIntact(t *testing.T) {
	_, c := dialProxy(t, time.Millisecond)
	want := make([]byte, 4<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	go func() {
		_, _ = c.Write(want)
		_ = c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes back, not the %d sent", len(got), len(want))
	}
}

func TestDelayProxyCloseCutsConnections(t *testing.T) {
	p, c := dialProxy(t, time.Millisecond)
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("read after Close succeeded")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("connection still open after Close")
	}
}

// The unix proxy delays as the TCP one does, between two unix sockets.
func TestUnixDelayProxyRoundTripTakesTwiceTheDelay(t *testing.T) {
	const delay = 30 * time.Millisecond
	dir, err := os.MkdirTemp("", "dp") // socket paths must be short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	echoOn(t, "unix", filepath.Join(dir, "echo.sock"))
	p, err := StartUnixDelayProxy(filepath.Join(dir, "proxy.sock"), filepath.Join(dir, "echo.sock"), delay)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c, err := net.Dial("unix", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	start := time.Now()
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 5)
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); string(got) != "hello" || took < 2*delay {
		t.Errorf("got %q after %s, want hello after at least %s", got, took, 2*delay)
	}
}
