package handback

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// PlanOptions say how the ephemeral container is made.
type PlanOptions struct {
	// Container is the pod's provisioner container (EP's or tether's:
	// tether's provisioner takes every EP flag); default csi-provisioner.
	Container string
	// Image is tether's provisioner image the container runs.
	Image string
}

// ContainerPrefix begins the name of every hand-back container; a pod's
// n-th is ContainerPrefix + n (an ephemeral container cannot run twice).
const ContainerPrefix = "tether-hand-back-"

// servingFlags are the provisioner flags that serve on the pod's network:
// the ephemeral container shares it with the container it copies, whose
// ports are taken, and a one-shot run serves nothing.
var servingFlags = map[string]bool{"http-endpoint": true, "metrics-address": true}

// Plan returns the ephemeral container that runs tether's provisioner with
// the arguments, environment, volume mounts and security context of the
// pod's provisioner container, less the flags that serve, plus
// --hand-back. Its user is root when neither the container nor the pod
// names one: EP's image ran as root, tether's image does not, and the
// driver's socket is commonly root's. It is pure.
func Plan(pod *corev1.Pod, o PlanOptions) (corev1.EphemeralContainer, error) {
	name := o.Container
	if name == "" {
		name = "csi-provisioner"
	}
	if o.Image == "" {
		return corev1.EphemeralContainer{}, fmt.Errorf("no image for the hand-back container")
	}
	var src *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			src = &pod.Spec.Containers[i]
		}
	}
	if src == nil {
		var names []string
		for _, c := range pod.Spec.Containers {
			names = append(names, c.Name)
		}
		return corev1.EphemeralContainer{}, fmt.Errorf("pod %s/%s has no container %q (it has %s): name the provisioner's with --container", pod.Namespace, pod.Name, name, strings.Join(names, ", "))
	}
	var args []string
	if len(src.Command) > 1 {
		args = append(args, src.Command[1:]...) // the first is EP's binary
	}
	args = append(dropServing(append(args, src.Args...)), "--hand-back")

	sc := src.SecurityContext.DeepCopy()
	if runAsUser(pod, src) == nil {
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		root := int64(0)
		sc.RunAsUser = &root
	}
	return corev1.EphemeralContainer{
		TargetContainerName: src.Name,
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name:            nextName(pod),
			Image:           o.Image,
			ImagePullPolicy: src.ImagePullPolicy,
			Args:            args,
			Env:             src.Env,
			EnvFrom:         src.EnvFrom,
			WorkingDir:      src.WorkingDir,
			VolumeMounts:    src.VolumeMounts,
			SecurityContext: sc,
		},
	}, nil
}

// dropServing returns args without servingFlags, in either form
// (--flag=value, or --flag value).
func dropServing(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		flag := strings.TrimLeft(args[i], "-")
		name, _, hasValue := strings.Cut(flag, "=")
		if strings.HasPrefix(args[i], "-") && servingFlags[name] {
			if !hasValue && i+1 < len(args) {
				i++
			}
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// runAsUser is the user the container runs as by its pod's spec, or nil
// when the image decides.
func runAsUser(pod *corev1.Pod, c *corev1.Container) *int64 {
	if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
		return c.SecurityContext.RunAsUser
	}
	if pod.Spec.SecurityContext != nil {
		return pod.Spec.SecurityContext.RunAsUser
	}
	return nil
}

// nextName is the name of the pod's next hand-back container.
func nextName(pod *corev1.Pod) string {
	n := 1
	for _, c := range pod.Spec.EphemeralContainers {
		var k int
		if _, err := fmt.Sscanf(c.Name, ContainerPrefix+"%d", &k); err == nil && k >= n {
			n = k + 1
		}
	}
	return fmt.Sprintf("%s%d", ContainerPrefix, n)
}
