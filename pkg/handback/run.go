package handback

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// RunOptions say how Run waits.
type RunOptions struct {
	// Timeout bounds the wait for the container to end (default 10
	// minutes).
	Timeout time.Duration
	// Poll is the interval between reads of the pod (default 1 s).
	Poll time.Duration
}

// Result is what a hand-back container ended with.
type Result struct {
	Pod, Container string
	// ExitCode is the provisioner's: 0 no claim holds the in-flight record,
	// 3 claims still wait for their volume (run again once the upstream
	// pair has provisioned them), anything else a failure.
	ExitCode int32
	// Reason is the kubelet's for the end (Completed, Error...).
	Reason string
	// Log is the container's log.
	Log string
}

// Run adds ec to pod, waits until it has ended, and returns how.
func Run(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, ec corev1.EphemeralContainer, o RunOptions) (Result, error) {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	logger := klog.FromContext(ctx)
	pods := client.CoreV1().Pods(pod.Namespace)
	with := pod.DeepCopy()
	with.Spec.EphemeralContainers = append(with.Spec.EphemeralContainers, ec)
	if _, err := pods.UpdateEphemeralContainers(ctx, pod.Name, with, metav1.UpdateOptions{}); err != nil {
		return Result{}, fmt.Errorf("adding container %s to pod %s/%s: %w", ec.Name, pod.Namespace, pod.Name, err)
	}
	logger.V(2).Info("Hand-back container added", "pod", klog.KObj(pod), "container", ec.Name)
	res := Result{Pod: pod.Name, Container: ec.Name}
	err := wait.PollUntilContextTimeout(ctx, o.Poll, o.Timeout, true, func(ctx context.Context) (bool, error) {
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil // read again
		}
		for _, st := range p.Status.EphemeralContainerStatuses {
			if st.Name == ec.Name && st.State.Terminated != nil {
				res.ExitCode, res.Reason = st.State.Terminated.ExitCode, st.State.Terminated.Reason
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return res, fmt.Errorf("container %s in pod %s/%s did not end within %s: %w", ec.Name, pod.Namespace, pod.Name, o.Timeout, err)
	}
	raw, err := pods.GetLogs(pod.Name, &corev1.PodLogOptions{Container: ec.Name}).DoRaw(ctx)
	if err != nil {
		logger.Info("The hand-back container's log could not be read", "pod", klog.KObj(pod), "container", ec.Name, "err", err)
	}
	res.Log = string(raw)
	return res, nil
}
