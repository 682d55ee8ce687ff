#!/usr/bin/env bash
# End-to-end on a real cluster made by kind: build the three images, load
# them into kind, apply deploy/csi, and run the example scenarios with real
# pods that write through the mounted volume and read it back.
#
# It needs kind, docker and kubectl on the PATH, and a container engine.
# Not run here: tether's machines have no container registry, so the
# kindest/node image cannot be pulled. make e2e runs the same deploy/csi
# as pods on real kubelet nodes of test/cluster instead (TestRealNodes).
set -euo pipefail
cd "$(dirname "$0")/.."
cluster=${KIND_CLUSTER:-tether-e2e}
tag=${TAG:-e2e}
for tool in kind docker kubectl; do
  command -v "$tool" >/dev/null || { echo "e2e-kind: $tool is not installed" >&2; exit 1; }
done

echo ">> building images"
docker build --build-arg TARGET=cmd/binder -t tether-binder:$tag .
docker build --build-arg TARGET=cmd/provisioner -t tether-provisioner:$tag .
docker build --build-arg TARGET=examples/local-driver --build-arg BASE=gcr.io/distroless/static:latest -t tether-local-driver:$tag .

echo ">> creating kind cluster $cluster (kube-controller-manager without its PV binder)"
cat > /tmp/tether-kind.yaml <<KIND
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
  - role: control-plane
    kubeadmConfigPatches:
      - |
        kind: ClusterConfiguration
        controllerManager:
          extraArgs:
            controllers: "*,-persistentvolume-binder-controller"
  - role: worker
  - role: worker
KIND
kind create cluster --name "$cluster" --config /tmp/tether-kind.yaml
trap '[ "${KEEP:-}" = 1 ] || kind delete cluster --name "$cluster"' EXIT
for image in tether-binder tether-provisioner tether-local-driver; do
  kind load docker-image --name "$cluster" "$image:$tag"
done

echo ">> applying deploy/csi"
work=$(mktemp -d)
cp -r deploy "$work/"
# Point the image settings at the images just loaded into kind.
sed -i -e "s#newName: ghcr.io/tether-csi/binder#newName: tether-binder#" \
       -e "s#newName: ghcr.io/tether-csi/provisioner#newName: tether-provisioner#" \
       -e "s#newName: ghcr.io/tether-csi/local-driver#newName: tether-local-driver#" \
       -e "/newName: tether-/{n;s#newTag: latest#newTag: $tag#}" "$work/deploy/csi/kustomization.yaml"
kubectl apply -k "$work/deploy/csi"
kubectl -n tether-system rollout status deploy/tether-binder --timeout=3m
kubectl -n tether-system rollout status ds/tether-local --timeout=3m

echo ">> scenarios"
kubectl apply -f examples/storageclass-local.yaml
kubectl apply -f examples/claim-immediate.yaml
kubectl apply -f examples/prebound-pv.yaml
kubectl apply -f examples/claim-with-volumename.yaml
kubectl apply -f examples/claim-and-pod.yaml
for claim in scratch db-data archive web-data; do
  kubectl wait --for=jsonpath='{.status.phase}'=Bound "pvc/$claim" --timeout=3m
done
kubectl wait --for=condition=Ready pod/web --timeout=3m
# The pod appends the date to /data/log; read it back through a new pod.
kubectl exec web -- sh -c 'echo tether > /data/check && cat /data/check' | grep -q tether
kubectl delete pod web --wait
kubectl delete pvc web-data --wait
echo ">> e2e-kind passed"
