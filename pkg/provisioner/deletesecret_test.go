package provisioner

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/tether-csi/tether/pkg/provisioner/request"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// deletePV is a Released CSI PV of the test class, bound to apps/data.
func deletePV(ann map[string]string) *v1.PersistentVolume {
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-1", Annotations: ann},
		Spec: v1.PersistentVolumeSpec{
			StorageClassName:              testClass,
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimDelete,
			ClaimRef:                      &v1.ObjectReference{Namespace: "apps", Name: "data"},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
				Driver: driverNm, VolumeHandle: "vol-1"}},
		},
	}
}

var epEmptyDeletionAnns = kv(request.AnnDeletionSecretName, "", request.AnnDeletionSecretNamespace, "")

func TestDeletionSecretRef(t *testing.T) {
	noClaim := deletePV(nil)
	noClaim.Spec.ClaimRef = nil
	tests := []struct {
		name    string
		pv      *v1.PersistentVolume
		class   *storagev1.StorageClass
		want    *v1.SecretReference
		wantErr string
	}{
		{name: "EP's empty annotations: no secret, the class is not read", pv: deletePV(epEmptyDeletionAnns),
			class: newClass(kv("csi.storage.k8s.io/provisioner-secret-name", "s", "csi.storage.k8s.io/provisioner-secret-namespace", "ns"))},
		{name: "annotations name the secret", pv: deletePV(kv(request.AnnDeletionSecretName, "s", request.AnnDeletionSecretNamespace, "ns")),
			want: &v1.SecretReference{Name: "s", Namespace: "ns"}},
		{name: "an empty name: no secret", pv: deletePV(kv(request.AnnDeletionSecretName, "", request.AnnDeletionSecretNamespace, "ns"))},
		{name: "an empty namespace: no secret", pv: deletePV(kv(request.AnnDeletionSecretName, "s", request.AnnDeletionSecretNamespace, ""))},
		{name: "no annotations, no class: no secret", pv: deletePV(nil)},
		{name: "no annotations, a class without secrets", pv: deletePV(nil), class: newClass(kv("type", "ssd"))},
		{name: "no annotations: the class's provisioner secret, resolved for the PV's claim", pv: deletePV(nil),
			class: newClass(kv("csi.storage.k8s.io/provisioner-secret-name", "${pvc.name}-${pv.name}", "csi.storage.k8s.io/provisioner-secret-namespace", "${pvc.namespace}")),
			want:  &v1.SecretReference{Name: "data-pvc-1", Namespace: "apps"}},
		{name: "no annotations: the class's default secret", pv: deletePV(nil),
			class: newClass(kv("csi.storage.k8s.io/secret-name", "d", "csi.storage.k8s.io/secret-namespace", "dns")),
			want:  &v1.SecretReference{Name: "d", Namespace: "dns"}},
		{name: "no annotations: the class's deprecated key", pv: deletePV(nil),
			class: newClass(kv("csiProvisionerSecretName", "old", "csiProvisionerSecretNamespace", "oldns")),
			want:  &v1.SecretReference{Name: "old", Namespace: "oldns"}},
		{name: "only one annotation: from the class", pv: deletePV(kv(request.AnnDeletionSecretName, "s")),
			class: newClass(kv("csi.storage.k8s.io/secret-name", "d", "csi.storage.k8s.io/secret-namespace", "dns")),
			want:  &v1.SecretReference{Name: "d", Namespace: "dns"}},
		{name: "no annotations, no claim reference: no secret", pv: noClaim,
			class: newClass(kv("csi.storage.k8s.io/secret-name", "d", "csi.storage.k8s.io/secret-namespace", "dns"))},
		{name: "no annotations: a broken class is an error", pv: deletePV(nil),
			class: newClass(kv("csi.storage.k8s.io/provisioner-secret-name", "s")), wantErr: "must be set together"},
		{name: "no annotations: a template the claim reference cannot fill is an error", pv: deletePV(nil),
			class:   newClass(kv("csi.storage.k8s.io/provisioner-secret-name", "${pvc.annotations['k']}", "csi.storage.k8s.io/provisioner-secret-namespace", "ns")),
			wantErr: `no annotation "k"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := request.DeletionSecretRef(tt.pv, tt.class)
			if !checkErr(t, err, tt.wantErr) {
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// secretsDriver records the secrets of each DeleteVolume.
type secretsDriver struct {
	Driver
	mu      sync.Mutex
	secrets []map[string]string
}

func (d *secretsDriver) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	d.mu.Lock()
	d.secrets = append(d.secrets, req.Secrets)
	d.mu.Unlock()
	return d.Driver.DeleteVolume(ctx, req)
}

// Delete with the deletion secret in every state: EP v6.3.0's empty
// annotations used to read a secret named "" and fail for ever.
func TestDeleteSecrets(t *testing.T) {
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Data: map[string][]byte{"key": []byte("v")}}
	tests := []struct {
		name        string
		pv          *v1.PersistentVolume
		class       *storagev1.StorageClass // nil: no class
		secretErr   error                   // the API's answer to the secret's GET
		wantSecrets map[string]string
		wantErr     string
	}{
		{name: "EP's empty annotations", pv: deletePV(epEmptyDeletionAnns), class: newClass(nil)},
		{name: "no annotations, the class gone", pv: deletePV(nil)},
		{name: "the annotated secret", pv: deletePV(kv(request.AnnDeletionSecretName, "s", request.AnnDeletionSecretNamespace, "ns")),
			wantSecrets: map[string]string{"key": "v"}},
		{name: "the annotated secret is gone: deleted without it, as EP", pv: deletePV(kv(request.AnnDeletionSecretName, "gone", request.AnnDeletionSecretNamespace, "ns"))},
		{name: "the secret may not be read: deleted without it, as EP", pv: deletePV(kv(request.AnnDeletionSecretName, "s", request.AnnDeletionSecretNamespace, "ns")),
			secretErr: apierrors.NewForbidden(v1.Resource("secrets"), "s", errors.New("no"))},
		{name: "the API fails: retried", pv: deletePV(kv(request.AnnDeletionSecretName, "s", request.AnnDeletionSecretNamespace, "ns")),
			secretErr: apierrors.NewInternalError(errors.New("etcd")), wantErr: "reading secret ns/s"},
		{name: "no annotations: the class's secret", pv: deletePV(nil),
			class:       newClass(kv("csi.storage.k8s.io/secret-name", "s", "csi.storage.k8s.io/secret-namespace", "ns")),
			wantSecrets: map[string]string{"key": "v"}},
		{name: "no annotations: a broken class", pv: deletePV(nil),
			class: newClass(kv("csi.storage.k8s.io/secret-name", "s")), wantErr: "must be set together"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			classes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			if tt.class != nil {
				if err := classes.Add(tt.class); err != nil {
					t.Fatal(err)
				}
			}
			var drv *secretsDriver
			e := newEnv(t, func(o *Options) {
				drv = &secretsDriver{Driver: o.Driver}
				o.Driver = drv
				o.Classes = storagelisters.NewStorageClassLister(classes)
			})
			if _, err := e.client.CoreV1().Secrets("ns").Create(e.ctx, secret, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if tt.secretErr != nil {
				e.client.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, tt.secretErr
				})
			}
			e.savePV(tt.pv)
			err := e.p.Delete(e.ctx, tt.pv)
			if !checkErr(t, err, tt.wantErr) {
				if len(drv.secrets) != 0 {
					t.Errorf("DeleteVolume was called after an error")
				}
				return
			}
			if len(drv.secrets) != 1 {
				t.Fatalf("%d DeleteVolume calls, want 1", len(drv.secrets))
			}
			if got := drv.secrets[0]; !reflect.DeepEqual(got, tt.wantSecrets) && !(len(got) == 0 && len(tt.wantSecrets) == 0) {
				t.Errorf("secrets %v, want %v", got, tt.wantSecrets)
			}
		})
	}
}
