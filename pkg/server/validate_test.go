package server

import (
	"strings"
	"testing"
	"time"
)

// The checks the commands run before --version and before any connection.
func TestValidate(t *testing.T) {
	leader := func(lease, renew, retry time.Duration, name string) LeaderOptions {
		o := DefaultLeaderOptions(name, true)
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = lease, renew, retry
		return o
	}
	for _, tc := range []struct {
		name string
		err  error
		want string // a fragment; "" for no error
	}{
		{"client defaults", KubeOptions{QPS: 5, Burst: 10}.Validate(), ""},
		{"no qps", KubeOptions{Burst: 10}.Validate(), "--kube-api-qps"},
		{"negative burst", KubeOptions{QPS: 5, Burst: -1}.Validate(), "--kube-api-burst"},
		{"no endpoint", HTTPOptions{}.Validate(), ""},
		{"an endpoint", HTTPOptions{Addr: ":8080", MetricsPath: "/m"}.Validate(), ""},
		{"no port", HTTPOptions{Addr: "8080"}.Validate(), "--http-endpoint=8080"},
		{"relative metrics path", HTTPOptions{Addr: ":8080", MetricsPath: "m"}.Validate(), "must start with /"},
		{"metrics on /healthz", HTTPOptions{Addr: ":8080", MetricsPath: "/healthz"}.Validate(), "/healthz"},
		{"leader defaults", DefaultLeaderOptions("x", true).Validate(), ""},
		{"no lease name", DefaultLeaderOptions("", true).Validate(), "no name"},
		{"timings without a name", DefaultLeaderOptions("", true).CheckTimings(), ""},
		{"lease not past renew", leader(10*time.Second, 10*time.Second, 2*time.Second, "x").CheckTimings(), "lease duration"},
		{"renew not past retry", leader(15*time.Second, 2*time.Second, 2*time.Second, "x").CheckTimings(), "renew deadline"},
		{"no retry", leader(15*time.Second, 10*time.Second, 0, "x").CheckTimings(), "retry period must be positive"},
	} {
		switch {
		case tc.want == "" && tc.err != nil:
			t.Errorf("%s: %v", tc.name, tc.err)
		case tc.want != "" && (tc.err == nil || !strings.Contains(tc.err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, tc.err, tc.want)
		}
	}
}
