// Command kubectl-tether is a kubectl plugin (kubectl tether ...). Its
// command, why, says why a PersistentVolumeClaim is in its state: the cause
// and what to do first, which binder runs, the volumes the binder passes
// over and why, and the provisioning path; with --all-pending, a table of
// every claim that waits, with its cause, in one namespace or (-A, as in
// kubectl) in every namespace. It prints text, or JSON or YAML of the same
// structs (-o). It only reads (get and list), and says what it could not
// read. It takes kubectl's cluster flags (--kubeconfig, --context, --server,
// --token, --as, ...: flags.go, from k8s.io/cli-runtime). Its command
// hand-back (handback.go) runs tether's provisioner with --hand-back in a
// driver's pod, for the switch back to EP.
//
// Exit status of why: 0 Bound, 1 not Bound, 2 cannot tell; 2 also for bad
// arguments, as a bad setting in every tether program (internal/cli), said
// before anything is read. Help asked for (-h, --help, help, and after
// version or why) is printed on stdout with status 0.
//
// The files:
//   - main.go: the commands (why, hand-back, version), the usage, why's
//     options and its reading, explaining and printing of one claim or
//     the table (-o text, json or yaml).
//   - flags.go: why's flags beside kubectl's cluster flags, and the
//     client configuration and namespace they give; --request-timeout
//     bounds the reads together.
//   - read.go: reader, which only gets and lists (a page at a time, with
//     field selectors where the API has them) what explain.Plan asks for
//     one claim, and records what it may not read as a gap.
//   - pending.go: --all-pending, the claims that wait in a namespace or
//     in every one (falling back to the context's namespace when it may
//     not list them all), with what they need read once for all.
//   - print.go: the text for a person: one explanation, or the table of
//     waiting claims.
//   - handback.go: hand-back, run in each pod of the target one after the
//     other (pkg/handback); exit status 0 when no claim holds the
//     in-flight record, 3 when claims still wait for their volume, 1 when
//     a run failed, 2 when it could not run.
package main
