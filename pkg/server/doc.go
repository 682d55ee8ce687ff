// Package server holds what both tether commands run besides their
// controllers:
//
//   - kube.go: the API client settings (--kubeconfig, --kube-api-qps,
//     --kube-api-burst);
//   - leader.go, work.go, stop.go: the Lease leader election, the work it
//     runs and how that work stops; leaselabels.go: the labels the Lease
//     gets (--leader-election-labels);
//   - http.go, metrics.go: the HTTP endpoint for metrics, health and
//     profiles (--http-endpoint);
//   - secure.go, reviews.go: on request (--metrics-secure) that endpoint
//     over HTTPS, its metrics and profiles answering only callers the API
//     server's TokenReview and SubjectAccessReview accept;
//   - calls.go: the count of calls in progress that must not outlive the
//     process (Calls).
//   - skew.go: whether the API server is of a newer minor release than the
//     API types tether is built with (Skew, WatchSkew), read now and then.
package server
