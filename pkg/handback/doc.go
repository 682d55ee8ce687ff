// Package handback runs tether's provisioner with --hand-back inside a CSI
// driver's running pod, as an ephemeral container, for the switch back to
// external-provisioner (EP) and KCM's binder (docs/migration.md): the pod
// holds the driver's socket (in an emptyDir beside a controller, or on the
// node), which no other pod can reach.
//
//   - plan.go: Plan, the ephemeral container made from the pod's
//     provisioner container (pure: a pod in, a container out).
//   - target.go: Pods, the pods of a workload (deployment/NAME,
//     daemonset/NAME, pod/NAME) that a hand-back runs in.
//   - run.go: Run, which adds the container to a pod, waits for it to end
//     and returns its exit status and log.
package handback
