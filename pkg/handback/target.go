package handback

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Pods returns the running pods of target in namespace that a hand-back
// runs in: "pod/NAME" that pod; "deployment/NAME" (a controller: every
// replica sees every claim) one of its running pods; "daemonset/NAME"
// (node-deployment mode: each pod serves its node's claims) every one.
func Pods(ctx context.Context, client kubernetes.Interface, namespace, target string) ([]corev1.Pod, error) {
	kind, name, ok := strings.Cut(target, "/")
	if !ok || name == "" {
		return nil, fmt.Errorf("target %q: give deployment/NAME, daemonset/NAME or pod/NAME", target)
	}
	var selector *metav1.LabelSelector
	switch strings.ToLower(kind) {
	case "pod", "pods", "po":
		pod, err := client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return running([]corev1.Pod{*pod}, target)
	case "deployment", "deployments", "deploy":
		d, err := client.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		selector = d.Spec.Selector
	case "daemonset", "daemonsets", "ds":
		d, err := client.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		selector = d.Spec.Selector
	default:
		return nil, fmt.Errorf("target %q: give deployment/NAME, daemonset/NAME or pod/NAME", target)
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", target, err)
	}
	list, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	pods, err := running(list.Items, target)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(strings.ToLower(kind), "deploy") {
		pods = pods[:1]
	}
	return pods, nil
}

// running keeps the pods that run and are not being deleted; none is an
// error.
func running(pods []corev1.Pod, target string) ([]corev1.Pod, error) {
	var out []corev1.Pod
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s has no running pod: the hand-back runs beside the driver, in its pod", target)
	}
	return out, nil
}
