package request

import (
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

func vacName(name string) claimOpt {
	return func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeAttributesClassName = &name }
}

func selector(c *v1.PersistentVolumeClaim) {
	c.Spec.Selector = &metav1.LabelSelector{MatchLabels: kv("tier", "gold")}
}

func newVAC(name, driver string, params map[string]string) *storagev1.VolumeAttributesClass {
	return &storagev1.VolumeAttributesClass{ObjectMeta: metav1.ObjectMeta{Name: name}, DriverName: driver, Parameters: params}
}

func TestSupported(t *testing.T) {
	tests := []struct {
		name         string
		claim        *v1.PersistentVolumeClaim
		modifyVolume bool
		wantErr      string
	}{
		{name: "plain claim", claim: newClaim()},
		{name: "plain claim, driver with MODIFY_VOLUME", claim: newClaim(), modifyVolume: true},
		{name: "attributes class, driver with MODIFY_VOLUME", claim: newClaim(vacName("gold")), modifyVolume: true},
		{name: "attributes class, driver without MODIFY_VOLUME", claim: newClaim(vacName("gold")),
			wantErr: "does not support VolumeAttributesClass: it does not report the controller capability MODIFY_VOLUME"},
		{name: "an empty attributes class name is none", claim: newClaim(vacName(""))},
		{name: "selector", claim: newClaim(selector), wantErr: "claim Selector is not supported"},
		{name: "empty selector", claim: newClaim(func(c *v1.PersistentVolumeClaim) { c.Spec.Selector = &metav1.LabelSelector{} }),
			wantErr: "claim Selector is not supported"},
		// As external-provisioner: the capability is checked first.
		{name: "selector and attributes class without MODIFY_VOLUME", claim: newClaim(selector, vacName("gold")), wantErr: "MODIFY_VOLUME"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, Supported(tt.claim, tt.modifyVolume), tt.wantErr)
		})
	}
}

func TestMutableParameters(t *testing.T) {
	tests := []struct {
		name    string
		vac     *storagev1.VolumeAttributesClass
		want    map[string]string
		wantErr string
	}{
		{name: "our driver", vac: newVAC("gold", driverNm, kv("iops", "3000")), want: kv("iops", "3000")},
		{name: "no parameters", vac: newVAC("gold", driverNm, nil)},
		{name: "another driver", vac: newVAC("gold", "other.csi", kv("iops", "3000")),
			wantErr: `the VolumeAttributesClass gold is for the driver "other.csi", not "csi.tether.dev"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MutableParameters(tt.vac, driverNm)
			if !checkErr(t, err, tt.wantErr) {
				return
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
			if got != nil {
				got["x"] = "y"
				if _, ok := tt.vac.Parameters["x"]; ok {
					t.Error("the result shares the class's map")
				}
			}
		})
	}
}
