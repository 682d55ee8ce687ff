package monitoring

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/tether-csi/tether/test/cluster"
)

// prometheus is a Prometheus server (Debian's) that a test runs on a
// loopback port, with its data in the test's folder.
type prometheus struct {
	addr string
	proc *cluster.Process
}

// scrapeJob is one scrape_config: a job and its targets (host:port).
type scrapeJob struct {
	name    string
	targets []string
}

// startPrometheus runs prometheus with the rules, scraping the jobs and
// evaluating the rules every second.
func startPrometheus(t *testing.T, c *cluster.Cluster, bin string, rules ruleFile, jobs ...scrapeJob) *prometheus {
	t.Helper()
	dir := t.TempDir()
	rulesData, err := yaml.Marshal(rules)
	if err != nil {
		t.Fatal(err)
	}
	rulesPath := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rulesPath, rulesData, 0o644); err != nil {
		t.Fatal(err)
	}
	var scrapes []map[string]any
	for _, j := range jobs {
		scrapes = append(scrapes, map[string]any{"job_name": j.name,
			"static_configs": []map[string]any{{"targets": j.targets}}})
	}
	config, err := yaml.Marshal(map[string]any{
		"global":         map[string]any{"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
		"rule_files":     []string{rulesPath},
		"scrape_configs": scrapes,
	})
	if err != nil {
		t.Fatal(err)
	}
	configPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configPath, config, 0o644); err != nil {
		t.Fatal(err)
	}
	p := &prometheus{addr: cluster.FreeAddr(t)}
	p.proc = c.Run(t, cluster.ProcessOptions{Name: "prometheus", Path: bin, Args: []string{
		"--config.file=" + configPath, "--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + p.addr, "--log.level=info",
	}})
	waitFor(t, "prometheus ready", 60*time.Second, func(ctx context.Context) (bool, error) {
		code, _, err := httpGet(ctx, "http://"+p.addr+"/-/ready")
		return err == nil && code == http.StatusOK, nil
	})
	return p
}

// promAlert is an alert of /api/v1/alerts.
type promAlert struct {
	Labels   map[string]string `json:"labels"`
	State    string            `json:"state"`
	ActiveAt time.Time         `json:"activeAt"`
	Value    string            `json:"value"`
}

// alerts reads /api/v1/alerts: the alerts pending or firing.
func (p *prometheus) alerts(ctx context.Context) ([]promAlert, error) {
	code, body, err := httpGet(ctx, "http://"+p.addr+"/api/v1/alerts")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("/api/v1/alerts: %d %s", code, body)
	}
	var resp struct {
		Status string `json:"status"`
		Data   struct {
			Alerts []promAlert `json:"alerts"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		return nil, err
	}
	if resp.Status != "success" {
		return nil, fmt.Errorf("/api/v1/alerts: status %s", resp.Status)
	}
	return resp.Data.Alerts, nil
}

// targetsUp reports the scrape targets' health, by scrape URL.
func (p *prometheus) targetsUp(ctx context.Context) (map[string]string, error) {
	code, body, err := httpGet(ctx, "http://"+p.addr+"/api/v1/targets")
	if err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("/api/v1/targets: %d %v", code, err)
	}
	var resp struct {
		Data struct {
			ActiveTargets []struct {
				ScrapeURL string `json:"scrapeUrl"`
				Health    string `json:"health"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, tg := range resp.Data.ActiveTargets {
		out[tg.ScrapeURL] = tg.Health
	}
	return out, nil
}

func httpGet(ctx context.Context, url string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// waitFor polls cond every 200ms until it holds, fails or the timeout
// passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	for {
		ok, err := cond(ctx)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %s", what, timeout)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
