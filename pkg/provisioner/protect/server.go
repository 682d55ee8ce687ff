package protect

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// usedOnServer asks the API server, not this process's cache, whether a
// claim of the namespace still uses a source: busy decides on the claims
// listed. The clone and snapshot protections ask it before a release,
// because a cache may not have seen a claim whose CreateVolume another
// process made: in node mode each node's provisioner protects and
// releases the same sources, each on its own claim cache. It costs one
// LIST of the namespace's claims per release, never per claim.
func usedOnServer(ctx context.Context, client kubernetes.Interface, namespace string,
	busy func([]*v1.PersistentVolumeClaim) (bool, string)) (bool, string, error) {
	list, err := client.CoreV1().PersistentVolumeClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, "", err
	}
	claims := make([]*v1.PersistentVolumeClaim, len(list.Items))
	for i := range list.Items {
		claims[i] = &list.Items[i]
	}
	used, claim := busy(claims)
	return used, claim, nil
}
