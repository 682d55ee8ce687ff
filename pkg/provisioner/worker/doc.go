// Package worker runs the provisioner's reconcilers: each keeps a rate
// limited work queue of keys, and Run's workers hand every key to the
// reconciler's step until the context ends.
//
// The files:
//   - worker.go: Run, a number of goroutines on one queue: a key whose
//     step fails is logged and added back through the queue's rate
//     limiter, a key whose step succeeds has its failures forgotten. When
//     the context ends Run shuts the queue down and returns only once
//     every worker has stopped.
package worker
