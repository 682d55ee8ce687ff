// Package cli is what tether's programs (binder, provisioner,
// kubectl-tether, tether-push) share on their command line: help asked for
// (-h, --help) goes to stdout with exit status 0, and a bad setting, found
// by the flag parser or by a later check of the values, exits with
// ExitBadSetting (2) before --version prints and before any connection to a
// cluster, a driver or a registry.
//
// Files:
//   - cli.go: Parse, the exit statuses, BadSetting.
//   - hint.go: Explain, the flag package's syntax error in one line with
//     what the value must be or the nearest flag's name.
package cli
