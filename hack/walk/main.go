// Command walk measures a newcomer's walk of one function, file by file:
// docs/development.md's measure of how a function reads.
//
// The walk reads the function top to bottom, each call after its
// receiver and arguments, as they run. Every call of a function or method
// of this module opens the file that declares it (an interface's method:
// the interface's file). A function of the walked function's own file is
// read in place, and its calls are walked too; a function of another file
// is read there, and what it calls is that file's business. A function
// already read is not read again. A stop is a run of calls into one file
// other than the function's own; a return is a stop in a file opened
// before.
//
// Usage (from the repository's root):
//
//	go run ./hack/walk ./pkg/provisioner Provisioner.Provision
//
// It prints each stop (file and the functions read there), then a line
// `walk: <stops> stops in <files> files, <returns> returns`.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: walk PACKAGE [TYPE.]FUNCTION")
		os.Exit(2)
	}
	w, err := Walk(os.Args[1], os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "walk:", err)
		os.Exit(1)
	}
	fmt.Print(w)
}
