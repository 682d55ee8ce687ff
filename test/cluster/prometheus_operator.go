package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// PrometheusOperatorVersion is the Prometheus Operator whose own CRDs the
// tests install to check tether's PodMonitors and PrometheusRules against
// the schema kube-prometheus-stack serves (the newest version the module
// proxy serves here).
const PrometheusOperatorVersion = "v0.85.0"

// PrometheusOperatorCRDs returns the Prometheus Operator's PodMonitor and
// PrometheusRule CRDs as one YAML stream, read from its module (go mod
// download, outside this module so that go.mod and go.sum stay as they
// are).
func PrometheusOperatorCRDs() ([]byte, error) {
	mod := "github.com/prometheus-operator/prometheus-operator@" + PrometheusOperatorVersion
	cmd := exec.Command("go", "mod", "download", "-json", mod)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
	out, err := cmd.Output()
	var got struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &got); jerr != nil || got.Error != "" || err != nil {
		return nil, fmt.Errorf("go mod download %s: %v %s %v", mod, err, got.Error, jerr)
	}
	var all bytes.Buffer
	for _, kind := range []string{"podmonitors", "prometheusrules"} {
		b, err := os.ReadFile(filepath.Join(got.Dir, "example/prometheus-operator-crd", "monitoring.coreos.com_"+kind+".yaml"))
		if err != nil {
			return nil, err
		}
		all.WriteString("---\n")
		all.Write(b)
	}
	return all.Bytes(), nil
}
