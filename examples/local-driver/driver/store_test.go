package driver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRestartRebuildsInventory(t *testing.T) {
	root := t.TempDir()
	td := openTestDriver(t, root, 20*gi)
	td.mustCreate("pvc-a", 3*gi)
	td.mustCreate("pvc-b", gi)
	td.mustCreate("odd name/with slash", 2*gi)
	td.mustCreate("pvc-gone", 4*gi)
	td.mustDelete("pvc-gone")
	if err := os.WriteFile(filepath.Join(root, "volumes", "pvc-a", "data"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	before, free := td.list(0), td.capacity(nil)

	// A new driver on the same root, as after a restart.
	again := openTestDriver(t, root, 20*gi)
	after := again.list(2)
	if fmt.Sprint(after) != fmt.Sprint(before) || len(after) != 3 {
		t.Fatalf("after restart listed %v, before %v", after, before)
	}
	if got := again.capacity(nil); got != free || got != 14*gi {
		t.Fatalf("after restart capacity %d, before %d, want %d", got, free, 14*gi)
	}
	if b, err := os.ReadFile(filepath.Join(root, "volumes", "pvc-a", "data")); string(b) != "kept" {
		t.Fatalf("data after restart: %q, %v", b, err)
	}
	// The restarted driver knows the old volumes: idempotent create, delete.
	if v := again.mustCreate("pvc-a", 3*gi); v.GetCapacityBytes() != 3*gi {
		t.Fatalf("recreate after restart: %v", v)
	}
	again.mustDelete("pvc-a")
	if got := again.capacity(nil); got != 17*gi {
		t.Fatalf("capacity %d, want %d", got, 17*gi)
	}
	// A smaller --capacity than what is allocated: nothing fits, nothing lost.
	small := openTestDriver(t, root, gi)
	if got := small.capacity(nil); got != 0 || len(small.list(0)) != 2 {
		t.Fatalf("shrunk: capacity %d, volumes %v", got, small.list(0))
	}
}

// TestRestartAfterCrash lays out what a crash at each step leaves and
// checks that a start cleans it up (see the comment in store.go).
func TestRestartAfterCrash(t *testing.T) {
	root := t.TempDir()
	td := openTestDriver(t, root, 10*gi)
	td.mustCreate("kept", gi)
	vols := filepath.Join(root, "volumes")
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(vols, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A metadata write that never got renamed.
	write(".torn.123", `{"name":"tor`)
	// A create that committed its metadata but did not make the folder.
	write("half.json", `{"name":"half","capacityBytes":2147483648}`)
	// A delete that removed the metadata but not the folder.
	if err := os.MkdirAll(filepath.Join(vols, "deleted", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	write("deleted/sub/file", "old data")

	again := openTestDriver(t, root, 10*gi)
	got := again.list(0)
	if len(got) != 2 || got["kept"] != gi || got["half"] != 2*gi {
		t.Fatalf("listed %v, want kept and half", got)
	}
	if c := again.capacity(nil); c != 7*gi {
		t.Fatalf("capacity %d, want %d", c, 7*gi)
	}
	for _, gone := range []string{".torn.123", "deleted"} {
		if _, err := os.Stat(filepath.Join(vols, gone)); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", gone, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(vols, "half")); err != nil || !fi.IsDir() {
		t.Fatalf("folder of the half-created volume: %v", err)
	}

	// A corrupt metadata file stops the start rather than being guessed at.
	write("bad.json", "{")
	if _, err := New(Config{Name: DefaultName, NodeID: "n", Root: root, Capacity: gi}); err == nil {
		t.Fatal("started over a corrupt metadata file")
	}
}

// TestDeleteLeftoverFolder: a delete whose folder removal failed is
// finished by the retry, and a new volume of the same ID starts empty.
func TestDeleteLeftoverFolder(t *testing.T) {
	td := newTestDriver(t, 10*gi)
	td.mustCreate("v", gi)
	folder := filepath.Join(td.root, "volumes", "v")
	if err := os.WriteFile(filepath.Join(folder, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// As if the delete stopped after removing the metadata.
	if err := td.d.store.removeMeta("v"); err != nil {
		t.Fatal(err)
	}
	td.d.store.mu.Lock()
	delete(td.d.store.vols, "v")
	td.d.store.used -= gi
	td.d.store.mu.Unlock()

	td.mustCreate("v", gi)
	if entries, err := os.ReadDir(folder); err != nil || len(entries) != 0 {
		t.Fatalf("new volume's folder holds %v (%v)", entries, err)
	}
	td.mustDelete("v")
	td.mustDelete("v")
	if _, err := os.Stat(folder); !os.IsNotExist(err) {
		t.Fatalf("folder after delete: %v", err)
	}
}

func TestKeyLocks(t *testing.T) {
	k := newKeyLocks()
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			unlock, err := k.lock(context.Background(), "a")
			if err != nil {
				t.Error(err)
				return
			}
			n := inside.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			runtime.Gosched() // let others try the lock while it is held
			inside.Add(-1)
			unlock()
		})
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Fatalf("%d holders of one key at once", most.Load())
	}

	// Other keys do not wait; a waiter whose context ends gives up.
	unlockA, _ := k.lock(context.Background(), "a")
	unlockB, err := k.lock(context.Background(), "b")
	if err != nil {
		t.Fatal(err)
	}
	unlockB()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := k.lock(ctx, "a"); err != context.DeadlineExceeded {
		t.Fatalf("waiting on a held key: %v", err)
	}
	unlockA()
	if k.size() != 0 {
		t.Fatalf("%d entries left", k.size())
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/plain`:           "/plain",
		`/with\040space`:   "/with space",
		`/tab\011and\134b`: "/tab\tand\\b",
		`/short\04`:        `/short\04`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}
