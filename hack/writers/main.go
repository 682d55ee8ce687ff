// Command writers is make lint's one-writer check: every write of a
// PersistentVolumeClaim or a PersistentVolume in the non-test Go files
// under pkg/ and cmd/ must be in a file that allow.txt permits for that
// object kind. Each program's writes of an object go through one part of
// it (the binder's Writer, the provisioner's record and PV writers), so
// that who may write what is found in one place; this keeps it so.
//
// A write is a call of Create, Update, UpdateStatus, Patch, Apply,
// ApplyStatus, Delete or DeleteCollection on a typed client of claims or
// PVs, seen in the syntax of one file at a time (go/ast, no type
// checking). A client is:
//
//   - what `.PersistentVolumeClaims(ns)` (kind pvc) or `.PersistentVolumes()`
//     (kind pv) returns, called at once: c.CoreV1().PersistentVolumes().Delete(...);
//   - a variable of the same function assigned one
//     (claims := c.CoreV1().PersistentVolumeClaims(ns); claims.Update(...));
//   - a variable, parameter, receiver or struct field declared with the
//     type PersistentVolumeClaimInterface or PersistentVolumeInterface (of
//     any package), or with a struct type of the same file that embeds
//     one (a wrapper: its own and its promoted methods count);
//   - such an embedded field, named: p.PersistentVolumeInterface.Create(...).
//
// It cannot see: a client handed from one function to another through a
// parameter or result not declared with those types, or assigned to a
// variable of another function; a wrapper type declared in another file;
// a method value (f := claims.Update; f(...)); writes through the dynamic
// client, a REST client, or a clientset handed to a library (the
// provisioner library writes PVs through the one LibraryClient wraps:
// the wrapper's file is the one listed); and names are matched, not
// types, so a struct field of those names on another type counts too.
// Listers and informers have no write methods, so they never count.
//
// Usage (from the repository's root, as hack/lint.sh runs it):
//
//	go run ./hack/writers [-allow hack/writers/allow.txt] [dir ...]
//
// The directories default to pkg and cmd. On failure it prints, for each
// write outside the allow-list, file:line, the object kind and the files
// that may write it, and exits 1; an allow-list entry naming a file that
// does not exist is a failure too (a file moved: move its entry).
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	allowPath := flag.String("allow", "hack/writers/allow.txt", "the allow-list")
	flag.Parse()
	dirs := flag.Args()
	if len(dirs) == 0 {
		dirs = []string{"pkg", "cmd"}
	}
	data, err := os.ReadFile(*allowPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "writers:", err)
		os.Exit(2)
	}
	allow, err := parseAllow(string(data))
	if err != nil {
		fmt.Fprintf(os.Stderr, "writers: %s: %v\n", *allowPath, err)
		os.Exit(2)
	}
	writes, err := scan(dirs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "writers:", err)
		os.Exit(2)
	}
	problems := judge(writes, allow, func(path string) bool {
		_, err := os.Stat(path)
		return err == nil
	})
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "writers: %d problem(s); the allow-list is %s\n", len(problems), *allowPath)
		os.Exit(1)
	}
	fmt.Printf("writers: ok (%d writes in %s, all in allowed files)\n", len(writes), strings.Join(dirs, ", "))
}
