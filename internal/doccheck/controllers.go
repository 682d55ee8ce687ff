package doccheck

import (
	"fmt"
	"regexp"
	"strings"
)

// KubeadmControllers is the one value of kube-controller-manager's
// --controllers that the documents, manifests and help give to turn KCM's
// binder off. `*` stands for the controllers that are on by default only:
// kubeadm (and kind, which runs kubeadm) starts KCM with
// `*,bootstrapsigner,tokencleaner`, and a value that drops those two stops
// new nodes joining (bootstrap tokens are no longer signed or cleaned). On
// a cluster that is not kubeadm's, the two have no tokens to act on.
const KubeadmControllers = "*,bootstrapsigner,tokencleaner,-persistentvolume-binder-controller"

// controllersValue is a --controllers list that turns KCM's binder off:
// one starting with `*` (or `...`, "what you had") up to the binder's name.
var controllersValue = regexp.MustCompile(`(?:\*|\.\.\.)[A-Za-z0-9*.,-]*?,-persistentvolume-binder-controller`)

// CheckControllers returns a problem for each --controllers list in text
// (the file path) that turns KCM's binder off with a value other than
// KubeadmControllers.
func CheckControllers(path, text string) []string {
	var out []string
	for i, line := range strings.Split(text, "\n") {
		for _, v := range controllersValue.FindAllString(line, -1) {
			if v != KubeadmControllers {
				out = append(out, fmt.Sprintf("%s:%d: --controllers value %q drops bootstrapsigner and tokencleaner, which kubeadm and kind run (nodes stop joining): give %q", path, i+1, v, KubeadmControllers))
			}
		}
	}
	return out
}
