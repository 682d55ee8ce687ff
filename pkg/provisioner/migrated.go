package provisioner

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"

	"github.com/tether-csi/tether/pkg/migration"
)

// csiClass returns the CSI form of a claim's class: the class itself, or,
// for a class of the in-tree plugin this driver takes over, the class with
// its parameters translated (migrated is then true).
func (p *Provisioner) csiClass(ctx context.Context, class *storagev1.StorageClass) (*storagev1.StorageClass, bool, error) {
	if p.o.MigratedFrom == "" || class.Provisioner != p.o.MigratedFrom {
		return class, false, nil
	}
	csiClass, err := migration.TranslateClass(klog.FromContext(ctx), class)
	if err != nil {
		return nil, false, fmt.Errorf("translating the in-tree class %s for %s: %w", class.Name, p.o.Driver.DriverName(), err)
	}
	return csiClass, true, nil
}

// csiVolume returns the CSI form of a PV: the PV itself, or, for an in-tree
// PV migrated to this driver (pv.kubernetes.io/migrated-to), its
// translation.
func (p *Provisioner) csiVolume(ctx context.Context, pv *v1.PersistentVolume) (*v1.PersistentVolume, error) {
	if pv.Spec.CSI != nil || p.o.MigratedFrom == "" || pv.Annotations[storagehelpers.AnnMigratedTo] != p.o.Driver.DriverName() {
		return pv, nil
	}
	out, err := migration.ToCSI(klog.FromContext(ctx), pv)
	if err != nil {
		return nil, fmt.Errorf("translating the in-tree volume %s for %s: %w", pv.Name, p.o.Driver.DriverName(), err)
	}
	return out, nil
}
