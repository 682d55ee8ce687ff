package doccheck

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/yaml"
)

// A Container is a container a manifest runs: its image and its args,
// where the file gives them.
type Container struct {
	Line  int // of its image
	Image string
	Args  []string
}

// Containers returns every container of the YAML documents in b: every
// mapping with an image and args, at any depth (a Deployment's, a
// DaemonSet's, a kustomize patch's).
func Containers(b []byte) ([]Container, error) {
	var out []Container
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		walkContainers(&doc, &out)
	}
}

func walkContainers(n *yaml.Node, out *[]Container) {
	if n.Kind == yaml.MappingNode {
		var c Container
		hasImage, hasArgs := false, false
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			switch {
			case k.Value == "image" && v.Kind == yaml.ScalarNode:
				c.Image, c.Line, hasImage = v.Value, v.Line, true
			case k.Value == "args" && v.Kind == yaml.SequenceNode:
				hasArgs = true
				for _, a := range v.Content {
					c.Args = append(c.Args, a.Value)
				}
			}
		}
		if hasImage && hasArgs {
			*out = append(*out, c)
		}
	}
	for _, child := range n.Content {
		walkContainers(child, out)
	}
}

// ImageProgram is the tether program an image runs, by its name: the
// last element of its repository, without tag or digest, with or without
// tether's prefix (tether-binder, ghcr.io/tether-csi/binder); "" for an
// image of another program.
func ImageProgram(image string) string {
	name := image
	if i := strings.IndexAny(name, "@"); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	repo, last := "", name
	if i := strings.LastIndex(name, "/"); i >= 0 {
		repo, last = name[:i], name[i+1:]
	}
	if repo != "" && repo != "tether-csi" && !strings.HasSuffix(repo, "/tether-csi") {
		return ""
	}
	if p, ok := strings.CutPrefix(last, "tether-"); ok {
		return p
	}
	if repo != "" {
		return last
	}
	return ""
}

// ManifestContainers returns the containers of every YAML file under
// root's deploy/ and examples/, by the file's path relative to root; the
// templates of a Helm chart (a templates folder beside a Chart.yaml) are
// left out.
func ManifestContainers(root string) (map[string][]Container, error) {
	out := map[string][]Container{}
	for _, dir := range []string{"deploy", "examples"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() {
				if e.Name() == "templates" && exists(filepath.Join(filepath.Dir(p), "Chart.yaml")) {
					return filepath.SkipDir // a Helm chart's templates are not YAML until rendered
				}
				return nil
			}
			if !strings.HasSuffix(p, ".yaml") && !strings.HasSuffix(p, ".yml") {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			cs, err := Containers(b)
			if err != nil {
				return fmt.Errorf("%s: %v", p, err)
			}
			rel, _ := filepath.Rel(root, p)
			out[rel] = cs
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ArgsProblem is a container's args that its program's flag parser
// refused, as "path:line: image: error".
func ArgsProblem(path string, c Container, err error) string {
	return fmt.Sprintf("%s:%d: %s %s: %v", path, c.Line, c.Image, strings.Join(c.Args, " "), err)
}

// UnknownArgs returns the flags among args (-name, --name, --name=value)
// that are not in known; an argument that is not a flag is left to the
// program's own parser.
func UnknownArgs(args []string, known map[string]bool) []string {
	var out []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !known[name] {
			out = append(out, "--"+name)
		}
	}
	return out
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
