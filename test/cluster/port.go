package cluster

import (
	"net"
)

// FreeAddr returns a loopback host:port that was free a moment ago, for a
// component that must be told its port.
func FreeAddr(t T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
