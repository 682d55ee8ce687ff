package kind

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// KindBinary returns the pinned kind (hack/tools, KIND_VERSION in
// versions.env) in binDir: the TOOLS_BIN environment variable when binDir
// is empty, else the repository's .cache/tools/bin. When it is not there it
// builds it with `hack/tools/build.sh BIN kind`.
func KindBinary(ctx context.Context, binDir string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	if binDir == "" {
		binDir = os.Getenv("TOOLS_BIN")
	}
	if binDir == "" {
		binDir = filepath.Join(root, ".cache", "tools", "bin")
	}
	path := filepath.Join(binDir, "kind")
	if st, err := os.Stat(path); err == nil && st.Mode()&0o111 != 0 {
		return path, nil
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "tools", "build.sh"), binDir, "kind")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("hack/tools/build.sh %s kind: %v\n%s", binDir, err, out)
	}
	return path, nil
}

// RepoRoot is the folder of tether's go.mod, found from the working
// directory upwards (tests run in their package's folder).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(data, []byte("module github.com/tether-csi/tether\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside tether's repository (no go.mod of github.com/tether-csi/tether above the working directory)")
		}
		dir = parent
	}
}
