// Command registryd serves an in-memory OCI registry
// (github.com/google/go-containerregistry/pkg/registry) on :5000: the image
// test/kind runs as "kind-registry", since no registry image can be pulled.
package main

import (
	"log"
	"net/http"
	"os"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	addr := ":5000"
	if len(os.Args) > 1 {
		addr = os.Args[1]
	}
	log.Printf("registryd: serving on %s", addr)
	log.Fatal(http.ListenAndServe(addr, registry.New()))
}
