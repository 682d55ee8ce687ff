package unixsock

import (
	"os"
	"path/filepath"
	"testing"
)

// The old pod's socket, replaced by the new pod's at the same path, goes
// without taking the new one with it.
func TestReplaced(t *testing.T) {
	dir, err := os.MkdirTemp("", "sock") // unix socket paths must stay short
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "csi.sock")
	old, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	if !old.Ours() {
		t.Fatal("a fresh socket is not ours")
	}
	cur, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	if old.Ours() || !cur.Ours() {
		t.Errorf("after the replacement: old ours %v, new ours %v", old.Ours(), cur.Ours())
	}
	old.Close()
	old.Remove()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the old socket's clean-up took the new one: %v", err)
	}
	cur.Close()
	cur.Remove()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the socket is left behind: %v", err)
	}
}
