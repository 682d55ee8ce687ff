// Command verify-release checks a release folder's supply-chain files
// (internal/release's VerifyRelease): SHA256SUMS, each image's SPDX SBOM
// against the binaries in its archive, and provenance.intoto.json
// (hack/release-check.sh runs it):
//
//	go run ./hack/verify-release _out/release/v0.1.0
package main

import (
	"fmt"
	"os"

	"github.com/tether-csi/tether/internal/cli"
	"github.com/tether-csi/tether/internal/release"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: verify-release <release folder>")
		os.Exit(cli.ExitBadSetting)
	}
	v, err := release.VerifyRelease(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "verify-release:", err)
		os.Exit(cli.ExitFailed)
	}
	fmt.Printf("verify-release: %d files as SHA256SUMS says; %d SBOMs valid (SPDX 2.3), naming the %d binaries in the archives; %s valid (in-toto v1, SLSA provenance v1), its subjects SHA256SUMS's\n",
		v.Files, len(v.SBOMs), v.Binaries, release.ProvenanceFile)
}
