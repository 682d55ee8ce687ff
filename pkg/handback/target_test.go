package handback

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestPods(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "drv"}}
	pod := func(name string, phase corev1.PodPhase, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels}, Status: corev1.PodStatus{Phase: phase}}
	}
	app := map[string]string{"app": "drv"}
	client := fake.NewClientset(
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ctl"}, Spec: appsv1.DeploymentSpec{Selector: sel}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "node"}, Spec: appsv1.DaemonSetSpec{Selector: sel}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "none"}, Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}}},
		pod("a", corev1.PodRunning, app), pod("b", corev1.PodRunning, app), pod("c", corev1.PodPending, app), pod("other", corev1.PodRunning, nil),
	)
	for _, tt := range []struct {
		target  string
		want    []string
		wantErr string
	}{
		{"deployment/ctl", []string{"a"}, ""},
		{"deploy/ctl", []string{"a"}, ""},
		{"daemonset/node", []string{"a", "b"}, ""},
		{"ds/node", []string{"a", "b"}, ""},
		{"pod/other", []string{"other"}, ""},
		{"pod/c", nil, "no running pod"},
		{"daemonset/none", nil, "no running pod"},
		{"statefulset/x", nil, "give deployment/NAME"},
		{"ctl", nil, "give deployment/NAME"},
		{"deployment/gone", nil, "not found"},
	} {
		pods, err := Pods(t.Context(), client, "ns", tt.target)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: err %v, want %q", tt.target, err, tt.wantErr)
			}
			continue
		}
		var got []string
		for _, p := range pods {
			got = append(got, p.Name)
		}
		if err != nil || strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("%s: pods %v (%v), want %v", tt.target, got, err, tt.want)
		}
	}
}
