package records

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/tether-csi/tether/pkg/inflight"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// Writer is the provisioner's one writer of the in-flight record on claims:
// it records a volume before its first CreateVolume (Record), drops the
// record (Drop), and hands a claim back to the scheduler (Reschedule),
// the only claim writes the provisioner makes beside the source
// protections' finalizers (package protect). Every write is an Update of
// the claim as read, carrying its resourceVersion.
type Writer struct {
	Client kubernetes.Interface
	// Driver is this provisioner's driver; Node its node in
	// node-deployment mode, else "".
	Driver, Node string
}

// UnreadError: the claim holds a record of a format this provisioner does
// not read; it is left as it is (docs/upgrade.md).
type UnreadError struct{ Format string }

func (e UnreadError) Error() string {
	return fmt.Sprintf("the claim's in-flight record is of format %q, which this provisioner does not read (it reads 1 to %d): left as it is for a provisioner that reads it (docs/upgrade.md)", e.Format, inflight.FormatRead)
}

// Record adds the record for the claim's volume (name) and, in
// node-deployment mode, this node. The write carries the resourceVersion
// of the claim the decision was made on, so a claim that changed meanwhile
// (deleted, or bound elsewhere) fails it with a conflict and the library
// tries again on the fresh claim (and no finalizer can be added to a claim
// being deleted). When the claim as given already carries the record (a
// CreateVolume tried again) there is no write to fail: Record reads the
// claim instead, and returns an error unless the API still has it, with
// the same UID, unbound and carrying this record (StaleError): a cache
// behind the API must not make a volume for a claim that is gone. A record
// of a format this provisioner does not read is never written over:
// UnreadError.
func (w *Writer) Record(ctx context.Context, claim *v1.PersistentVolumeClaim, name string) (*v1.PersistentVolumeClaim, error) {
	if inflight.Unread(claim) {
		return nil, UnreadError{Format: claim.Annotations[inflight.AnnFormat]}
	}
	c := claim.DeepCopy()
	changed := inflight.Record(c, w.Driver, name)
	if w.Node != "" && c.Annotations[inflight.AnnNode] != w.Node {
		c.Annotations[inflight.AnnNode] = w.Node
		changed = true
	}
	for _, old := range []string{inflight.AnnSource, inflight.AnnSnapshot} {
		if _, ok := c.Annotations[old]; ok {
			delete(c.Annotations, old) // an earlier version's, trusted no more
			changed = true
		}
	}
	if !changed {
		return w.still(ctx, claim, name)
	}
	out, err := w.Client.CoreV1().PersistentVolumeClaims(c.Namespace).Update(ctx, c, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("recording the volume in flight on the claim: %w", err)
	}
	return out, nil
}

// StaleError: the claim the provisioner decided on is not the API's any
// more; no CreateVolume is made for it now.
type StaleError struct{ Why string }

func (e StaleError) Error() string {
	return "the claim changed since it was read (" + e.Why + "): no volume is made for it until the provisioner sees the claim as it is now"
}

// still reads the claim from the API and returns it if it still waits for
// the volume its record names, on the node the request was built for (see
// Record): the same claim, not being deleted, unbound, its selected node
// the one claim has, its record this provisioner's for name.
func (w *Writer) still(ctx context.Context, claim *v1.PersistentVolumeClaim, name string) (*v1.PersistentVolumeClaim, error) {
	cur, err := w.Client.CoreV1().PersistentVolumeClaims(claim.Namespace).Get(ctx, claim.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, StaleError{Why: "it is gone"}
	case err != nil:
		return nil, fmt.Errorf("reading the claim before the volume is made: %w", err)
	case cur.UID != claim.UID:
		return nil, StaleError{Why: "it is gone; another claim has its name"}
	case cur.DeletionTimestamp != nil:
		return nil, StaleError{Why: "it is being deleted"}
	case cur.Spec.VolumeName != "":
		return nil, StaleError{Why: "it is bound to " + cur.Spec.VolumeName}
	case selectedNode(cur) != selectedNode(claim):
		return nil, StaleError{Why: fmt.Sprintf("its selected node is %q, not %q", selectedNode(cur), selectedNode(claim))}
	}
	if driver, vol, ok := inflight.Volume(cur); !ok || inflight.Unread(cur) || vol != name || driver != w.Driver ||
		w.Node != "" && cur.Annotations[inflight.AnnNode] != w.Node {
		return nil, StaleError{Why: "its in-flight record is not the one for " + name + " any more"}
	}
	return cur, nil
}

func selectedNode(c *v1.PersistentVolumeClaim) string {
	return c.Annotations[storagehelpers.AnnSelectedNode]
}

// Drop removes the record: first with one write on the claim as
// given (usually current), then, on a conflict, from fresh reads of the
// same claim (same UID: a claim re-created under the name keeps its own).
func (w *Writer) Drop(ctx context.Context, claim *v1.PersistentVolumeClaim) error {
	c := claim.DeepCopy()
	if !inflight.Forget(c) {
		return nil
	}
	_, err := w.Client.CoreV1().PersistentVolumeClaims(c.Namespace).Update(ctx, c, metav1.UpdateOptions{})
	if err == nil || apierrors.IsNotFound(err) {
		return nil
	}
	return updateClaim(ctx, w.Client, claim.Namespace, claim.Name, func(c *v1.PersistentVolumeClaim) bool {
		return c.UID == claim.UID && inflight.Forget(c)
	})
}

// updateClaim applies change to a fresh copy of a claim and writes it if
// change says so, retrying conflicts on fresh reads. A claim that is gone
// needs nothing.
func updateClaim(ctx context.Context, client kubernetes.Interface, namespace, name string, change func(*v1.PersistentVolumeClaim) bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		claim, err := client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		if !change(claim) {
			return nil
		}
		_, err = client.CoreV1().PersistentVolumeClaims(namespace).Update(ctx, claim, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// Reschedule hands a claim back to the scheduler: it removes the selected
// node. The in-flight record stays: an earlier CreateVolume may have made
// the volume (one that timed out, then ResourceExhausted); in
// node-deployment mode the record's node cleans it up once the claim has
// moved. The library would remove the node from its cached claim, which
// our own writes have usually made stale, so we do it from a fresh read.
func (w *Writer) Reschedule(ctx context.Context, claim *v1.PersistentVolumeClaim) error {
	return updateClaim(ctx, w.Client, claim.Namespace, claim.Name, func(c *v1.PersistentVolumeClaim) bool {
		if c.UID != claim.UID {
			return false
		}
		_, selected := c.Annotations[storagehelpers.AnnSelectedNode]
		delete(c.Annotations, storagehelpers.AnnSelectedNode)
		return selected
	})
}
