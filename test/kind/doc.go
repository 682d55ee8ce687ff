// Package kind is the host side of `make e2e-kind`: a docker engine to run a
// kind cluster in, a local registry beside it, the pinned kind binary, and
// a check that the machine is left as it was found.
//
// The files, each small:
//
//	docker.go     Start and Stop a docker engine: the user's own (DOCKER_HOST
//	              or a working default socket), or a private dockerd.
//	engine.go     the private dockerd: one folder, its own network and mount
//	              namespace, cgroup parent, containerd and runc wrapper.
//	engine_stop.go  its removal: processes, namespace, cgroup parent, folder.
//	stale.go      CleanStale: removes engines whose owner died without Stop.
//	runcwrap.go   the runc wrapper for hosts whose bounding set lacks
//	              CAP_SYS_RESOURCE (privileged containers fail without it).
//	netns.go      DialContext: connections made inside the engine's network
//	              namespace, so the host reaches ports its containers publish.
//	image.go      LoadImage (docker load of a go-containerregistry image) and
//	              BusyboxImage (Debian's static busybox as an image).
//	registry.go   StartRegistry: "kind-registry" on network "kind", published
//	              on 127.0.0.1:5001, and the nodes' containerd hosts.toml.
//	registryd/    the registry's program (go-containerregistry's registry).
//	kindbin.go    KindBinary: the pinned kind (hack/tools) in TOOLS_BIN.
//	hostcheck.go  TakeSnapshot and Diff: what a run could change on the host.
//
// The tests start docker, so they run only with TETHER_KIND=1 and as root;
// TETHER_KIND_HOSTCHECK_SKIP (colon-separated) names mount points of
// others' work on a shared machine that the host check ignores.
package kind
