package provisioner

import (
	"errors"
	"strings"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v8/controller"
)

func attachment(name, pv, node string) *storagev1.VolumeAttachment {
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: driverNm, NodeName: node}}
	if pv != "" {
		va.Spec.Source.PersistentVolumeName = &pv
	}
	return va
}

func TestDecideDetach(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	onNode1, onNode2 := attachment("va-b", "pvc-1", "node-1"), attachment("va-a", "pvc-1", "node-2")
	other, inline := attachment("va-c", "pvc-2", "node-1"), attachment("va-d", "", "node-1")
	tests := []struct {
		name string
		in   detachInput
		want detachStep
	}{
		{name: "no PUBLISH_UNPUBLISH_VOLUME: attachments do not matter (as EP)",
			in: detachInput{PV: "pvc-1", Attachments: []*storagev1.VolumeAttachment{onNode1}, Now: now}},
		{name: "nothing attached",
			in: detachInput{PublishUnpublish: true, PV: "pvc-1", Now: now}},
		{name: "attachments of other PVs and of inline volumes",
			in: detachInput{PublishUnpublish: true, PV: "pvc-1", Attachments: []*storagev1.VolumeAttachment{other, inline}, Now: now}},
		{name: "attached: wait, and tell it",
			in:   detachInput{PublishUnpublish: true, PV: "pvc-1", Attachments: []*storagev1.VolumeAttachment{other, onNode1}, Now: now},
			want: detachStep{Wait: true, Attachment: "va-b", Node: "node-1", Event: true}},
		{name: "attached to two nodes: the first attachment by name",
			in:   detachInput{PublishUnpublish: true, PV: "pvc-1", Attachments: []*storagev1.VolumeAttachment{onNode1, onNode2}, Now: now},
			want: detachStep{Wait: true, Attachment: "va-a", Node: "node-2", Event: true}},
		{name: "told a minute ago: wait, quietly",
			in: detachInput{PublishUnpublish: true, PV: "pvc-1", Attachments: []*storagev1.VolumeAttachment{onNode1},
				LastEvent: now.Add(-time.Minute), Now: now},
			want: detachStep{Wait: true, Attachment: "va-b", Node: "node-1"}},
		{name: "told long ago: tell again",
			in: detachInput{PublishUnpublish: true, PV: "pvc-1", Attachments: []*storagev1.VolumeAttachment{onNode1},
				LastEvent: now.Add(-detachEventEvery), Now: now},
			want: detachStep{Wait: true, Attachment: "va-b", Node: "node-1", Event: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decideDetach(tt.in); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// handlerInformer keeps the handlers added to it; the test calls them.
type handlerInformer struct {
	cache.SharedIndexInformer
	handlers []cache.ResourceEventHandler
}

func (i *handlerInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	i.handlers = append(i.handlers, h)
	return nil, nil
}

func (i *handlerInformer) deleted(obj any) {
	for _, h := range i.handlers {
		h.OnDelete(obj)
	}
}

// detachEnv is an env whose VolumeAttachments the test holds.
func detachEnv(t *testing.T, publish bool) (*env, cache.Indexer) {
	t.Helper()
	vas := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	e := newEnv(t, func(o *Options) {
		o.PublishUnpublish = publish
		o.VolumeAttachments = storagelisters.NewVolumeAttachmentLister(vas)
	})
	return e, vas
}

// Delete with and without PUBLISH_UNPUBLISH_VOLUME, attached or not.
func TestDeleteWaitsForDetach(t *testing.T) {
	tests := []struct {
		name     string
		publish  bool
		watch    bool // WatchDetach wired
		attached string
		// wantDeletes is the number of DeleteVolume calls; wantIgnored:
		// an IgnoredError (the library neither retries nor warns);
		// wantErr: a plain error (the library retries, with a Warning).
		wantDeletes int
		wantIgnored bool
		wantErr     string
		wantEvent   string
	}{
		{name: "no PUBLISH_UNPUBLISH_VOLUME, attached: deleted at once, as EP", attached: "pvc-1", watch: true, wantDeletes: 1},
		{name: "PUBLISH_UNPUBLISH_VOLUME, not attached", publish: true, watch: true, wantDeletes: 1},
		{name: "PUBLISH_UNPUBLISH_VOLUME, another PV attached", publish: true, watch: true, attached: "pvc-2", wantDeletes: 1},
		{name: "PUBLISH_UNPUBLISH_VOLUME, attached: waits, with a Normal event", publish: true, watch: true, attached: "pvc-1",
			wantIgnored: true, wantEvent: "Normal VolumeDelete Waiting for the volume to be detached from node node-1"},
		{name: "PUBLISH_UNPUBLISH_VOLUME, attached, no watch: the library retries", publish: true, attached: "pvc-1",
			wantErr: "waiting for the volume to be detached from node node-1 (VolumeAttachment va-1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, vas := detachEnv(t, tt.publish)
			if tt.watch {
				if err := e.p.WatchDetach(DetachOptions{VolumeAttachments: &handlerInformer{}, Requeue: func(string) {}, Recorder: e.recorder}); err != nil {
					t.Fatal(err)
				}
			}
			if tt.attached != "" {
				if err := vas.Add(attachment("va-1", tt.attached, "node-1")); err != nil {
					t.Fatal(err)
				}
			}
			pv := deletePV(nil)
			e.savePV(pv)
			err := e.p.Delete(e.ctx, pv)
			var ignored *controller.IgnoredError
			switch {
			case tt.wantIgnored:
				if !errors.As(err, &ignored) {
					t.Errorf("err %v, want an IgnoredError", err)
				}
			case tt.wantErr != "":
				if errors.As(err, &ignored) || err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err %v, want a plain error with %q", err, tt.wantErr)
				}
			case err != nil:
				t.Errorf("err %v", err)
			}
			if n := len(e.driver.deletes); n != tt.wantDeletes {
				t.Errorf("%d DeleteVolume calls, want %d", n, tt.wantDeletes)
			}
			evs := e.events()
			if tt.wantEvent == "" && len(evs) > 0 || tt.wantEvent != "" && (len(evs) != 1 || !strings.HasPrefix(evs[0], tt.wantEvent)) {
				t.Errorf("events %q, want %q", evs, tt.wantEvent)
			}
		})
	}
}

// A wait from its start to the detach: told once, then again after
// detachEventEvery; the VolumeAttachment's deletion hands the PV back,
// and only a waiting one.
func TestDetachWaitLifecycle(t *testing.T) {
	e, vas := detachEnv(t, true)
	inf := &handlerInformer{}
	var requeued []string
	if err := e.p.WatchDetach(DetachOptions{VolumeAttachments: inf, Requeue: func(pv string) { requeued = append(requeued, pv) },
		Recorder: e.recorder}); err != nil {
		t.Fatal(err)
	}
	va, other := attachment("va-1", "pvc-1", "node-1"), attachment("va-2", "pvc-2", "node-1")
	for _, a := range []*storagev1.VolumeAttachment{va, other} {
		if err := vas.Add(a); err != nil {
			t.Fatal(err)
		}
	}
	pv := deletePV(nil)
	e.savePV(pv)
	wait := func(wantEvents int) {
		t.Helper()
		var ignored *controller.IgnoredError
		if err := e.p.Delete(e.ctx, pv); !errors.As(err, &ignored) {
			t.Fatalf("err %v, want an IgnoredError", err)
		}
		if evs := e.events(); len(evs) != wantEvents {
			t.Errorf("events %q, want %d", evs, wantEvents)
		}
	}
	wait(1)
	wait(0)
	e.clock = e.clock.Add(time.Minute)
	wait(0)
	e.clock = e.clock.Add(detachEventEvery)
	wait(1)

	// Another PV's detach hands nothing back.
	if err := vas.Delete(other); err != nil {
		t.Fatal(err)
	}
	inf.deleted(other)
	if len(requeued) != 0 {
		t.Errorf("requeued %v after another PV's detach", requeued)
	}
	if err := vas.Delete(va); err != nil {
		t.Fatal(err)
	}
	inf.deleted(cache.DeletedFinalStateUnknown{Key: va.Name, Obj: va})
	if len(requeued) != 1 || requeued[0] != pv.Name {
		t.Fatalf("requeued %v, want [%s]", requeued, pv.Name)
	}
	if err := e.p.Delete(e.ctx, pv); err != nil {
		t.Fatal(err)
	}
	if len(e.driver.deletes) != 1 {
		t.Errorf("%d DeleteVolume calls, want 1", len(e.driver.deletes))
	}
	// Its wait is over: a second delete event of it hands nothing back.
	inf.deleted(va)
	if len(requeued) != 1 {
		t.Errorf("requeued %v, want it once", requeued)
	}
	if _, ok := e.p.detach.waiting[pv.Name]; ok {
		t.Error("the PV still waits after its deletion")
	}
}
