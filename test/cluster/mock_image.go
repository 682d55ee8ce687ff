package cluster

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// MockDriverImage is the csi-test mock driver as a local image, for a
// driver pod on real nodes (the upstream image cannot be fetched here). Its
// user is root, as the upstream mock's image: the socket it makes is
// srwxr-xr-x root, as most drivers' are.
const MockDriverImage = "localhost/csi-mock-driver:e2e"

var (
	mockStaticMu   sync.Mutex
	mockStaticPath string
)

// MockDriverNodeImage packs the csi-test mock driver, at the version
// hack/tools/versions.env pins (MOCK_DRIVER_VERSION), as MockDriverImage.
// The tools cache's mock-driver is linked dynamically, which an image with
// nothing but the binary cannot run, so this builds it again without cgo,
// inside its own module (its go.mod decides every dependency, as
// hack/tools/build.sh builds it), once per test binary.
func MockDriverNodeImage(t T) Image {
	t.Helper()
	path := buildStaticMock(t)
	return Image{Ref: MockDriverImage, Files: map[string]string{"mock-driver": path}, Entrypoint: []string{"/mock-driver"}}
}

func buildStaticMock(t T) string {
	t.Helper()
	mockStaticMu.Lock()
	defer mockStaticMu.Unlock()
	if mockStaticPath != "" {
		if _, err := os.Stat(mockStaticPath); err == nil {
			return mockStaticPath
		}
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	version, err := pinnedVersion(filepath.Join(root, "hack", "tools", "versions.env"), "MOCK_DRIVER_VERSION")
	if err != nil {
		t.Fatal(err)
	}
	const module = "github.com/kubernetes-csi/csi-test/v4"
	// Outside any module, so that the download needs no go.mod of ours.
	outside := t.TempDir()
	download := exec.CommandContext(t.Context(), "go", "mod", "download", "-json", module+"@"+version)
	download.Dir, download.Env = outside, append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := download.Output()
	if err != nil {
		t.Fatalf("go mod download %s@%s: %v\n%s", module, version, err, out)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s@%s: %v %s", module, version, err, mod.Error)
	}
	dir, err := os.MkdirTemp("", "tether-mock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "mock-driver")
	// The module cache is read-only; go build writes only the output and
	// its own cache.
	build := exec.CommandContext(t.Context(), "go", "build", "-trimpath", "-o", path, "./cmd/mock-driver")
	build.Dir = mod.Dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build the mock driver %s: %v\n%s", version, err, out)
	}
	if err := checkStatic(path); err != nil {
		t.Fatal(err)
	}
	mockStaticPath = path
	return path
}

// pinnedVersion reads NAME=value from a versions file such as
// hack/tools/versions.env.
func pinnedVersion(file, name string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), name+"="); ok && v != "" {
			return v, nil
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s: no %s", file, name)
}
