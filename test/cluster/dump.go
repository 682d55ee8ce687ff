package cluster

import (
	"context"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// dump writes PVs, PVCs, pods, storage capacity and events as YAML into dir.
func (c *Cluster) dump(dir string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	opts := metav1.ListOptions{}
	lists := map[string]func() (any, error){
		"pvs":        func() (any, error) { return c.Client.CoreV1().PersistentVolumes().List(ctx, opts) },
		"pvcs":       func() (any, error) { return c.Client.CoreV1().PersistentVolumeClaims("").List(ctx, opts) },
		"pods":       func() (any, error) { return c.Client.CoreV1().Pods("").List(ctx, opts) },
		"events":     func() (any, error) { return c.Client.CoreV1().Events("").List(ctx, opts) },
		"capacities": func() (any, error) { return c.Client.StorageV1().CSIStorageCapacities("").List(ctx, opts) },
	}
	for name, list := range lists {
		obj, err := list()
		var data []byte
		if err == nil {
			data, err = yaml.Marshal(obj)
		}
		if err != nil {
			data = []byte(err.Error())
		}
		_ = os.WriteFile(filepath.Join(dir, name+".yaml"), data, 0o644)
	}
}
