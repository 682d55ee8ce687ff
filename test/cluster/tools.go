package cluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

const modulePath = "github.com/tether-csi/tether"

// ToolsDir is the folder that holds the pinned control-plane binaries built by
// `make tools`. TETHER_TOOLS_BIN overrides it; otherwise it is .cache/tools/bin
// under the repository root, found by walking up from the working directory.
func ToolsDir() (string, error) {
	if dir := os.Getenv("TETHER_TOOLS_BIN"); dir != "" {
		return dir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".cache", "tools", "bin"), nil
}

// RepoRoot walks up from the working directory to the tether module root.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(data, []byte("module "+modulePath+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("cluster: no go.mod of %s above the working directory", modulePath)
		}
		dir = parent
	}
}

// Tool returns the path of one pinned binary, or an error that says how to
// build it.
func Tool(name string) (string, error) {
	dir, err := ToolsDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("cluster: %s is missing from %s; run `make tools` (the first build takes about 10 minutes on 2 cores)", name, dir)
	}
	return path, nil
}
