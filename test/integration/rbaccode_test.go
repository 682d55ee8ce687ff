package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	snapscheme "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/scheme"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/restmapper"

	"github.com/tether-csi/tether/test/cluster"
)

// TestRBACCoversCode derives, from tether's source, every request the
// binder and the provisioner can make to the API server, and fails for
// each one deploy/csi's RBAC does not allow the component's
// ServiceAccount, naming the call.
//
// Why from the source: a request made only on a rare path (the
// provisioner's GET of a node, in node mode, when an in-flight record
// names a node its cache does not know) is seldom or never made by a
// test, so no run of the tests, however recorded, shows it reliably. The
// source shows every call, taken or not. Requests made inside libraries
// (client-go's informers and leader election are known here; the
// provisioner library's own PV and claim writes are not) are checked the
// other way round: the integration tests run both components with
// cluster.RBACCheckedKubeconfig, which records every request they make
// and checks it against the same RBAC.
//
// How: the packages of cmd/binder and cmd/provisioner that are part of
// this module are type-checked (go/types, their imports from `go list
// -export`), and every call is looked at:
//   - a method of a typed client of client-go or of the snapshot client
//     (NodeInterface.Get, PersistentVolumeClaimInterface.UpdateStatus,
//     EventExpansion.PatchWithEventNamespace...) is the verb of its method
//     on the resource of its type;
//   - Informer() or Lister() of a typed informer is list and watch;
//   - resourcelock.New is get, create and update of leases (client-go's
//     leader election), a typedcorev1.EventSinkImpl is create and patch of
//     events (client-go's event recorder);
//   - anything that reaches the API server another way (a RESTClient, a
//     dynamic or metadata client, a hand-made ListWatch) fails the test
//     unless taught here (taught) what the function using it requests.
//
// A package is counted for each command that imports it. Resources and
// their scope come from the API server's discovery (the snapshot CRDs
// installed), and GroupVersionKinds from client-go's and the snapshot
// client's schemes.
func TestRBACCoversCode(t *testing.T) {
	c := cluster.Start(t, cluster.Options{})
	cluster.InstallSnapshotCRDs(t, c)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Client.Discovery()))
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	components := map[string]string{"./cmd/binder": "tether-binder", "./cmd/provisioner": "tether-provisioner"}
	// The rules a component needs but deploy/csi grants only with an
	// optional component, as external-provisioner's RBAC does.
	optIn := map[string]map[string]string{
		"tether-binder": {
			"create tokenreviews.authentication.k8s.io":        "secure-metrics",
			"create subjectaccessreviews.authorization.k8s.io": "secure-metrics",
		},
		"tether-provisioner": {
			"get secrets": "provisioner-secrets",
			"create tokenreviews.authentication.k8s.io":        "secure-metrics",
			"create subjectaccessreviews.authorization.k8s.io": "secure-metrics",
		},
	}

	calls, err := apiCalls(root, mapper, slices.Sorted(func(yield func(string) bool) {
		for cmd := range components {
			if !yield(cmd) {
				return
			}
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	rbac := cluster.DeployRBAC(t)
	for cmd, sa := range components {
		needed := map[cluster.APIRequest][]string{}
		for _, call := range calls {
			if call.problem != "" || !slices.Contains(call.commands, cmd) {
				continue
			}
			if why, ok := unreachable[call.fn+": "+call.req.String()]; ok {
				t.Logf("%s at %s (%s): not needed: %s", call.req, call.where, call.fn, why)
				continue
			}
			needed[call.req] = append(needed[call.req], call.where)
		}
		if len(needed) == 0 {
			t.Errorf("%s: no API call found: the analysis is broken", cmd)
		}
		var names []string
		for req := range needed {
			names = append(names, req.String())
		}
		sort.Strings(names)
		t.Logf("%s (%s) needs: %s", cmd, sa, strings.Join(names, ", "))
		for req, where := range needed {
			if component, ok := optIn[sa][req.String()]; ok {
				if rbac.Allows(sa, req) {
					t.Errorf("%s: deploy/csi grants %s by default; it is meant to be opt-in (components/%s)", sa, req, component)
				}
				if !cluster.DeployRBAC(t, component).Allows(sa, req) {
					t.Errorf("%s: deploy/csi/components/%s does not grant %s, which %s needs at %s", sa, component, req, cmd, where[0])
				}
				continue
			}
			if !rbac.Allows(sa, req) {
				sort.Strings(where)
				t.Errorf("deploy/csi's RBAC does not let %s %s, which %s does at %s", sa, req, cmd, strings.Join(where, ", "))
			}
		}
	}
	for _, call := range calls {
		if call.problem != "" {
			t.Errorf("%s: %s", call.where, call.problem)
		}
	}
	for key, reqs := range taught {
		fn, _, _ := strings.Cut(key, ": ")
		if !slices.ContainsFunc(calls, func(c apiCall) bool { return c.fn == fn && c.req == reqs[0] }) {
			t.Errorf("taught names %q, which the source no longer holds: drop it", key)
		}
	}
	for key := range unreachable {
		if !slices.ContainsFunc(calls, func(c apiCall) bool { return c.fn+": "+c.req.String() == key }) {
			t.Errorf("unreachable names %q, which the source no longer holds: drop it", key)
		}
	}
}

// unreachable are calls in tether's source that the components cannot
// make with the libraries they ship with, by function and request; each
// says why. The RBAC need not grant them.
var unreachable = map[string]string{
	"pkg/provisioner/libv8.patchVolumes.Update: update persistentvolumes": "the fallback for a library PV Update that changes " +
		"more than the finalizers; sig-storage-lib-external-provisioner v8 changes nothing else in its Updates (the " +
		"protection finalizer added or removed, the finalizer removed after Delete), so FinalizerPatch sends them as " +
		"patches, as external-provisioner's ClusterRole (no update of PVs) needs",
}

// apiCall is one place in tether's source that makes a request (or cannot
// be analysed: problem).
type apiCall struct {
	req      cluster.APIRequest
	fn       string   // the function that makes it
	where    string   // file:line
	commands []string // the commands whose binary holds it
	problem  string
}

// listedPackage is what apiCalls reads of `go list -json`.
type listedPackage struct {
	ImportPath, Dir, Export string
	GoFiles                 []string
	Module                  *struct{ Path string }
}

// apiCalls type-checks the module's packages that the commands import and
// returns their API calls.
func apiCalls(root string, mapper meta.RESTMapper, commands []string) ([]apiCall, error) {
	goList := func(args ...string) ([]byte, error) {
		cmd := exec.Command("go", append([]string{"list"}, args...)...)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return out, nil
	}
	out, err := goList(append([]string{"-deps", "-export", "-json=ImportPath,Dir,Export,GoFiles,Module"}, commands...)...)
	if err != nil {
		return nil, err
	}
	exports := map[string]string{}
	var own []listedPackage
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		exports[p.ImportPath] = p.Export
		if p.Module != nil && p.Module.Path == "github.com/tether-csi/tether" {
			own = append(own, p)
		}
	}
	importedBy := map[string][]string{} // package -> commands
	for _, cmd := range commands {
		deps, err := goList("-deps", cmd)
		if err != nil {
			return nil, err
		}
		for _, p := range strings.Fields(string(deps)) {
			importedBy[p] = append(importedBy[p], cmd)
		}
	}

	kinds := kindIndex()
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	})
	var calls []apiCall
	for _, p := range own {
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
			if err != nil {
				return nil, err
			}
			files = append(files, f)
		}
		info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}, Uses: map[*ast.Ident]types.Object{},
			Types: map[ast.Expr]types.TypeAndValue{}}
		if _, err := (&types.Config{Importer: imp}).Check(p.ImportPath, fset, files, info); err != nil {
			return nil, fmt.Errorf("type-checking %s: %w", p.ImportPath, err)
		}
		a := &analysis{fset: fset, info: info, kinds: kinds, mapper: mapper, commands: importedBy[p.ImportPath], root: root}
		short := strings.TrimPrefix(p.ImportPath, "github.com/tether-csi/tether/")
		for _, f := range files {
			for _, decl := range f.Decls {
				a.fn = short
				if fd, ok := decl.(*ast.FuncDecl); ok {
					a.fn = short + "." + funcName(fd)
				}
				ast.Inspect(decl, a.visit)
			}
		}
		calls = append(calls, a.calls...)
	}
	return calls, nil
}

// kindIndex maps "<group directory>/<version>.<Kind>" (core/v1.Node,
// volumesnapshot/v1.VolumeSnapshot), as the typed clients' and informers'
// package paths end, to the GroupVersionKind, from the Go packages of the
// schemes' types.
func kindIndex() map[string]schema.GroupVersionKind {
	out := map[string]schema.GroupVersionKind{}
	for _, all := range []map[schema.GroupVersionKind]reflect.Type{scheme.Scheme.AllKnownTypes(), snapscheme.Scheme.AllKnownTypes()} {
		for gvk, typ := range all {
			parts := strings.Split(typ.PkgPath(), "/")
			if len(parts) < 2 {
				continue
			}
			out[strings.Join(parts[len(parts)-2:], "/")+"."+typ.Name()] = gvk
		}
	}
	return out
}

var (
	typedClientPkg = regexp.MustCompile(`^(?:k8s\.io/client-go/kubernetes|github\.com/kubernetes-csi/external-snapshotter/client/v\d+/clientset/versioned)/typed/([^/]+/[^/]+)$`)
	informerPkg    = regexp.MustCompile(`^(?:k8s\.io/client-go/informers|github\.com/kubernetes-csi/external-snapshotter/client/v\d+/informers/externalversions)/([^/]+/[^/]+)$`)
)

// clientVerbs are the typed clients' methods by verb and subresource.
var clientVerbs = map[string][2]string{
	"Get": {"get"}, "List": {"list"}, "Watch": {"watch"}, "Create": {"create"}, "Update": {"update"},
	"UpdateStatus": {"update", "status"}, "Delete": {"delete"}, "DeleteCollection": {"deletecollection"},
	"Patch": {"patch"}, "PatchStatus": {"patch", "status"}, "Apply": {"patch"}, "ApplyStatus": {"patch", "status"},
	"CreateWithEventNamespace": {"create"}, "UpdateWithEventNamespace": {"update"}, "PatchWithEventNamespace": {"patch"},
}

// Functions and constructors that reach the API server without a typed
// client: what they need, or nil when this analysis cannot tell.
var knownFuncs = map[string][]cluster.APIRequest{
	"k8s.io/client-go/tools/leaderelection/resourcelock.New": {
		{Verb: "get", Group: "coordination.k8s.io", Resource: "leases", Namespaced: true},
		{Verb: "create", Group: "coordination.k8s.io", Resource: "leases", Namespaced: true},
		{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespaced: true},
	},
	"k8s.io/client-go/tools/cache.NewListWatchFromClient":         nil,
	"k8s.io/client-go/tools/cache.NewFilteredListWatchFromClient": nil,
	"k8s.io/client-go/dynamic.NewForConfig":                       nil,
	"k8s.io/client-go/dynamic.NewForConfigAndClient":              nil,
	"k8s.io/client-go/metadata.NewForConfig":                      nil,
	"k8s.io/client-go/rest.RESTClientFor":                         nil,
	"k8s.io/client-go/rest.UnversionedRESTClientFor":              nil,
}

// taught are the requests made through a client of knownFuncs, or a
// typed client's RESTClient, that this analysis cannot follow, by the
// tether function that makes it and the constructor (or "RESTClient").
var taught = map[string][]cluster.APIRequest{
	// The scoped informers read their listings' pages through the core
	// group's REST client (scope.StreamPages): lists of claims and PVs
	// across the cluster, the same as their typed clients' List.
	"pkg/provisioner/scope.restClient: RESTClient": {
		{Verb: "list", Resource: "persistentvolumeclaims", Namespaced: true},
		{Verb: "list", Resource: "persistentvolumes"},
	},
	// The owner lookup of --capacity-ownerref-level reads the pod and,
	// at level 2, its controller: for a Deployment's pod, its ReplicaSet
	// (external-provisioner's RBAC grants the same two). A higher level,
	// or one through another kind, needs a grant of its own (docs/provisioner.md).
	"cmd/provisioner.capacityOwner: k8s.io/client-go/metadata.NewForConfig": {
		{Verb: "get", Resource: "pods", Namespaced: true},
		{Verb: "get", Group: "apps", Resource: "replicasets", Namespaced: true},
	},
}

type analysis struct {
	fn       string // the function being looked at: pkg/provisioner/libv8.patchVolumes.Update
	fset     *token.FileSet
	info     *types.Info
	kinds    map[string]schema.GroupVersionKind
	mapper   meta.RESTMapper
	commands []string
	root     string
	calls    []apiCall
}

func (a *analysis) add(pos token.Pos, req cluster.APIRequest, problem string) {
	p := a.fset.Position(pos)
	where := p.Filename
	if rel, err := filepath.Rel(a.root, where); err == nil {
		where = rel
	}
	a.calls = append(a.calls, apiCall{req: req, fn: a.fn, where: fmt.Sprintf("%s:%d", where, p.Line), commands: a.commands, problem: problem})
}

// request is the request of a verb on a kind named as a typed package
// names it.
func (a *analysis) request(pos token.Pos, dir, kind, verb, sub string) {
	gvk, ok := a.kinds[dir+"."+kind]
	if !ok {
		a.add(pos, cluster.APIRequest{}, fmt.Sprintf("kind %s of %s is in no scheme this test knows", kind, dir))
		return
	}
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		a.add(pos, cluster.APIRequest{}, fmt.Sprintf("%s: %v", gvk, err))
		return
	}
	a.add(pos, cluster.APIRequest{Verb: verb, Group: gvk.Group, Resource: m.Resource.Resource, Subresource: sub,
		Namespaced: m.Scope.Name() == meta.RESTScopeNameNamespace}, "")
}

func (a *analysis) visit(n ast.Node) bool {
	switch n := n.(type) {
	case *ast.CompositeLit:
		if named := namedOf(a.info.Types[n].Type); named != nil && named.Obj().Pkg() != nil &&
			named.Obj().Pkg().Path() == "k8s.io/client-go/kubernetes/typed/core/v1" && named.Obj().Name() == "EventSinkImpl" {
			// client-go's event recorder creates events, and patches
			// them as they repeat.
			a.request(n.Pos(), "core/v1", "Event", "create", "")
			a.request(n.Pos(), "core/v1", "Event", "patch", "")
		}
	case *ast.SelectorExpr:
		// Called or taken as a value (a method value passed on makes
		// the same request when called).
		if s := a.info.Selections[n]; s != nil && s.Kind() == types.MethodVal {
			a.method(n.Pos(), s.Obj().(*types.Func))
			return true
		}
		if fn, ok := a.info.Uses[n.Sel].(*types.Func); ok && fn.Pkg() != nil {
			name := fn.Pkg().Path() + "." + fn.Name()
			reqs, known := knownFuncs[name]
			switch {
			case !known:
			case reqs == nil && taught[a.fn+": "+name] != nil:
				for _, r := range taught[a.fn+": "+name] {
					a.add(n.Pos(), r, "")
				}
			case reqs == nil:
				a.add(n.Pos(), cluster.APIRequest{}, name+" reaches the API server in a way TestRBACCoversCode cannot follow: teach it")
			default:
				for _, r := range reqs {
					a.add(n.Pos(), r, "")
				}
			}
		}
	}
	return true
}

// method looks at a method of a typed client or informer, used at pos.
func (a *analysis) method(pos token.Pos, fn *types.Func) {
	sig := fn.Type().(*types.Signature)
	named := namedOf(sig.Recv().Type())
	if named == nil || named.Obj().Pkg() == nil {
		return
	}
	pkg, typeName := named.Obj().Pkg().Path(), named.Obj().Name()
	if m := typedClientPkg.FindStringSubmatch(pkg); m != nil {
		if fn.Name() == "RESTClient" {
			if reqs := taught[a.fn+": RESTClient"]; reqs != nil {
				for _, r := range reqs {
					a.add(pos, r, "")
				}
				return
			}
			a.add(pos, cluster.APIRequest{}, "a RESTClient reaches the API server in a way TestRBACCoversCode cannot follow: teach it")
			return
		}
		// Getters (CoreV1(), Nodes(), PersistentVolumeClaims(ns)) hand
		// out clients; only the clients' own methods make requests.
		if sig.Results().Len() == 1 {
			if r := namedOf(sig.Results().At(0).Type()); r != nil && strings.HasSuffix(r.Obj().Name(), "Interface") {
				return
			}
		}
		kind := strings.TrimSuffix(strings.TrimSuffix(typeName, "Interface"), "Expansion")
		verb, ok := clientVerbs[fn.Name()]
		if !ok {
			a.add(pos, cluster.APIRequest{}, fmt.Sprintf("%s.%s.%s: a method TestRBACCoversCode does not know: teach it its verb", pkg, typeName, fn.Name()))
			return
		}
		a.request(pos, m[1], kind, verb[0], verb[1])
		return
	}
	if m := informerPkg.FindStringSubmatch(pkg); m != nil && strings.HasSuffix(typeName, "Informer") &&
		(fn.Name() == "Informer" || fn.Name() == "Lister") {
		kind := strings.TrimSuffix(typeName, "Informer")
		a.request(pos, m[1], kind, "list", "")
		a.request(pos, m[1], kind, "watch", "")
	}
}

// funcName is a function's name, with its receiver's type for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	if idx, ok := t.(*ast.IndexExpr); ok {
		t = idx.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// namedOf is the named type of t, through a pointer.
func namedOf(t types.Type) *types.Named {
	if t == nil {
		return nil
	}
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, _ := types.Unalias(t).(*types.Named)
	return n
}
