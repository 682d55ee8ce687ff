package request

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// OwnerKey is the CreateVolume parameter that marks a volume as made by
// this cluster's provisioner (Options.Owner). The sweep deletes a
// volume only when the driver's ListVolumes returns this key in the
// volume's context with this cluster's ID and the Delete reclaim policy,
// and what it saw of the volume since it started allows it (sweep.Decide).
const OwnerKey = "tether.dev/owner"

// OwnerMark is the value of OwnerKey: the reclaim policy of the class the
// volume was made for, a slash, and the cluster's ID (which may itself
// hold slashes). The policy is the class's at CreateVolume time and is
// never updated: it says what the volume was made for, not what anyone
// wants of it now.
func OwnerMark(cluster string, reclaim v1.PersistentVolumeReclaimPolicy) string {
	return string(reclaim) + "/" + cluster
}

// ParseOwnerMark splits a mark; ok is false when it is not one.
func ParseOwnerMark(mark string) (cluster string, reclaim v1.PersistentVolumeReclaimPolicy, ok bool) {
	r, c, ok := strings.Cut(mark, "/")
	if !ok || r == "" || c == "" {
		return "", "", false
	}
	return c, v1.PersistentVolumeReclaimPolicy(r), true
}
