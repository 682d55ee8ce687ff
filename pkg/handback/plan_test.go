package handback

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func driverPod(mod func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "drv-0"}, Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "driver", Image: "example.com/driver:v1"},
		{Name: "csi-provisioner", Image: "registry.k8s.io/sig-storage/csi-provisioner:v6.4.0", ImagePullPolicy: corev1.PullIfNotPresent,
			Args:          []string{"--csi-address=$(ADDRESS)", "--leader-election", "--http-endpoint=:8080", "--v=5"},
			Env:           []corev1.EnvVar{{Name: "ADDRESS", Value: "/csi/csi.sock"}, {Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}},
			VolumeMounts:  []corev1.VolumeMount{{Name: "socket-dir", MountPath: "/csi"}},
			Ports:         []corev1.ContainerPort{{ContainerPort: 8080}},
			LivenessProbe: &corev1.Probe{}},
	}}}
	if mod != nil {
		mod(p)
	}
	return p
}

func TestPlan(t *testing.T) {
	uid := func(n int64) *int64 { return &n }
	for _, tt := range []struct {
		name     string
		pod      *corev1.Pod
		opts     PlanOptions
		wantArgs []string
		wantUser *int64
		wantName string
		wantErr  string
	}{
		{name: "EP's sidecar: its args less the endpoint, plus --hand-back, as root", pod: driverPod(nil),
			wantArgs: []string{"--csi-address=$(ADDRESS)", "--leader-election", "--v=5", "--hand-back"}, wantUser: uid(0), wantName: "tether-hand-back-1"},
		{name: "the serving flags in their two-word form", pod: driverPod(func(p *corev1.Pod) {
			p.Spec.Containers[1].Args = []string{"--metrics-address", ":8081", "-http-endpoint", ":9", "--csi-address=/c"}
		}), wantArgs: []string{"--csi-address=/c", "--hand-back"}, wantUser: uid(0), wantName: "tether-hand-back-1"},
		{name: "a command's arguments come first", pod: driverPod(func(p *corev1.Pod) {
			p.Spec.Containers[1].Command = []string{"/csi-provisioner", "--v=2"}
			p.Spec.Containers[1].Args = []string{"--csi-address=/c"}
		}), wantArgs: []string{"--v=2", "--csi-address=/c", "--hand-back"}, wantUser: uid(0), wantName: "tether-hand-back-1"},
		{name: "the container's user is kept", pod: driverPod(func(p *corev1.Pod) {
			p.Spec.Containers[1].SecurityContext = &corev1.SecurityContext{RunAsUser: uid(1000)}
		}), wantArgs: []string{"--csi-address=$(ADDRESS)", "--leader-election", "--v=5", "--hand-back"}, wantUser: uid(1000), wantName: "tether-hand-back-1"},
		{name: "the pod's user decides when the container names none", pod: driverPod(func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: uid(2000)}
		}), wantArgs: []string{"--csi-address=$(ADDRESS)", "--leader-election", "--v=5", "--hand-back"}, wantUser: nil, wantName: "tether-hand-back-1"},
		{name: "a second run gets the next name", pod: driverPod(func(p *corev1.Pod) {
			p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "tether-hand-back-1"}},
				{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger-x"}}}
		}), wantArgs: []string{"--csi-address=$(ADDRESS)", "--leader-election", "--v=5", "--hand-back"}, wantUser: uid(0), wantName: "tether-hand-back-2"},
		{name: "another container name", pod: driverPod(func(p *corev1.Pod) { p.Spec.Containers[1].Name = "provisioner" }),
			opts: PlanOptions{Container: "provisioner"}, wantArgs: []string{"--csi-address=$(ADDRESS)", "--leader-election", "--v=5", "--hand-back"}, wantUser: uid(0), wantName: "tether-hand-back-1"},
		{name: "no such container", pod: driverPod(nil), opts: PlanOptions{Container: "provisioner"}, wantErr: `has no container "provisioner" (it has driver, csi-provisioner)`},
		{name: "no image", pod: driverPod(nil), opts: PlanOptions{Image: "-"}, wantErr: "no image"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.opts
			switch o.Image {
			case "":
				o.Image = "ghcr.io/tether-csi/provisioner:v0.1.0"
			case "-":
				o.Image = ""
			}
			before := tt.pod.DeepCopy()
			ec, err := Plan(tt.pod, o)
			if !reflect.DeepEqual(before, tt.pod) {
				t.Error("Plan changed the pod")
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			src := tt.pod.Spec.Containers[1]
			if !reflect.DeepEqual(ec.Args, tt.wantArgs) || ec.Name != tt.wantName || ec.Image != o.Image || ec.TargetContainerName != src.Name {
				t.Errorf("container %s image %s target %s args %q; want %s, %q", ec.Name, ec.Image, ec.TargetContainerName, ec.Args, tt.wantName, tt.wantArgs)
			}
			var user *int64
			if ec.SecurityContext != nil {
				user = ec.SecurityContext.RunAsUser
			}
			if !reflect.DeepEqual(user, tt.wantUser) {
				t.Errorf("runAsUser %v, want %v", user, tt.wantUser)
			}
			if !reflect.DeepEqual(ec.Env, src.Env) || !reflect.DeepEqual(ec.VolumeMounts, src.VolumeMounts) || ec.Ports != nil || ec.LivenessProbe != nil {
				t.Errorf("env %v mounts %v ports %v probe %v: want the container's env and mounts, no ports or probes", ec.Env, ec.VolumeMounts, ec.Ports, ec.LivenessProbe)
			}
		})
	}
}
