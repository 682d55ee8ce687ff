package csi

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

func TestCompareDriver(t *testing.T) {
	base := Capabilities{ControllerService: true, CreateDelete: true}
	withClone := base
	withClone.Clone = true
	tests := []struct {
		name     string
		newName  string
		newCaps  Capabilities
		wantDiff []string // "" for no error
	}{
		{"same", "d", base, nil},
		{"renamed", "e", base, []string{`name "e", was "d"`}},
		{"capability added", "d", withClone, []string{"capabilities", "Clone:true"}},
		{"both", "e", Capabilities{}, []string{"name", "capabilities"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := compareDriver("d", base, tt.newName, tt.newCaps)
			if tt.wantDiff == nil {
				if err != nil {
					t.Errorf("compareDriver = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrDriverChanged) {
				t.Fatalf("compareDriver = %v, want ErrDriverChanged", err)
			}
			for _, w := range tt.wantDiff {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// watch starts Watch and returns its result channel.
func watch(ctx context.Context, c *Conn) <-chan error {
	out := make(chan error, 1)
	go func() { out <- c.Watch(ctx) }()
	return out
}

// A driver that restarts as it was is read again, and Watch goes on.
func TestWatchDriverRestartsUnchanged(t *testing.T) {
	path := testSocket(t)
	stop := serveStoppable(t, path, provisioningDriver())
	logger, logs := newLogger(0)
	ctx, cancel := context.WithTimeout(withLogger(context.Background(), logger), 30*time.Second)
	defer cancel()
	c := connect(t, ctx, Options{Address: path, Timeout: time.Second})
	rechecked := make(chan struct{}, 10)
	c.onRecheck = func() { rechecked <- struct{}{} }
	wctx, stopWatch := context.WithCancel(ctx)
	result := watch(wctx, c)

	for restart := 1; restart <= 2; restart++ {
		again := provisioningDriver()
		stop()
		waitForLine(t, ctx, logs, "Lost the connection to the CSI driver")
		stop = serveStoppable(t, path, again)
		select {
		case <-rechecked:
		case err := <-result:
			t.Fatalf("restart %d: Watch returned %v", restart, err)
		case <-ctx.Done():
			t.Fatalf("restart %d: the driver was not read again; logs:\n%s", restart, strings.Join(logs.all(), "\n"))
		}
		if again.probes.Load() == 0 || again.ctrlCapsGot.Load() == 0 {
			t.Errorf("restart %d: the new driver was not probed and asked for its capabilities", restart)
		}
	}
	stopWatch()
	if err := <-result; err != nil {
		t.Errorf("Watch = %v after its context ended, want nil", err)
	}
}

// A driver that comes back with other capabilities or another name ends
// Watch with ErrDriverChanged.
func TestWatchDriverRestartsChanged(t *testing.T) {
	withClone := provisioningDriver()
	withClone.ctrlCaps = append(withClone.ctrlCaps, csi.ControllerServiceCapability_RPC_CLONE_VOLUME)
	renamed := provisioningDriver()
	renamed.name = "other.csi.tether.io"
	for _, tt := range []struct {
		name string
		next *fakeDriver
		want string
	}{
		{"capability added", withClone, "Clone:true"},
		{"renamed", renamed, `name "other.csi.tether.io"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := testSocket(t)
			stop := serveStoppable(t, path, provisioningDriver())
			logger, logs := newLogger(0)
			ctx, cancel := context.WithTimeout(withLogger(context.Background(), logger), 30*time.Second)
			defer cancel()
			c := connect(t, ctx, Options{Address: path, Timeout: time.Second})
			result := watch(ctx, c)
			stop()
			waitForLine(t, ctx, logs, "Lost the connection to the CSI driver")
			serve(t, path, tt.next)
			select {
			case err := <-result:
				if !errors.Is(err, ErrDriverChanged) || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("Watch = %v, want ErrDriverChanged mentioning %q", err, tt.want)
				}
			case <-ctx.Done():
				t.Fatalf("Watch did not notice the change; logs:\n%s", strings.Join(logs.all(), "\n"))
			}
		})
	}
}

// Watch ends with the connection.
func TestWatchEndsOnClose(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Connect(ctx, Options{Address: startDriver(t, provisioningDriver()), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	result := watch(ctx, c)
	_ = c.Close()
	select {
	case err := <-result:
		if err != nil {
			t.Errorf("Watch = %v after Close, want nil", err)
		}
	case <-ctx.Done():
		t.Fatal("Watch did not return after Close")
	}
}
