package cluster

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/component-helpers/auth/rbac/validation"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// RBAC is what deploy/csi lets each of its ServiceAccounts do, parsed
// from the rendered bundle (`kubectl kustomize`), by ServiceAccount name.
type RBAC struct {
	// Cluster are the rules of ClusterRoles bound by ClusterRoleBindings:
	// anywhere.
	Cluster map[string][]rbacv1.PolicyRule
	// Own are the rules of Roles (and ClusterRoles) bound by RoleBindings
	// in the ServiceAccount's own namespace: there only.
	Own map[string][]rbacv1.PolicyRule
}

// APIRequest is one kind of request to the API server, as RBAC sees it.
type APIRequest struct {
	Verb, Group, Resource, Subresource string
	// Namespaced: the object (or list) is in a namespace.
	Namespaced bool
}

func (r APIRequest) String() string {
	res := r.Resource
	if r.Subresource != "" {
		res += "/" + r.Subresource
	}
	if r.Group != "" {
		res += "." + r.Group
	}
	return r.Verb + " " + res
}

// Allows reports whether sa may make the request. A namespaced request
// is checked against the Roles of the ServiceAccount's own namespace too:
// in tests the components run in whatever namespace the test gives them
// (their lease, their capacity objects), which stands for the pod's.
func (r RBAC) Allows(sa string, req APIRequest) bool {
	rule := rbacv1.PolicyRule{APIGroups: []string{req.Group}, Resources: []string{req.Resource}, Verbs: []string{req.Verb}}
	if req.Subresource != "" {
		rule.Resources = []string{req.Resource + "/" + req.Subresource}
	}
	if ok, _ := validation.Covers(r.Cluster[sa], []rbacv1.PolicyRule{rule}); ok {
		return true
	}
	if !req.Namespaced {
		return false
	}
	ok, _ := validation.Covers(r.Own[sa], []rbacv1.PolicyRule{rule})
	return ok
}

var (
	rbacMu    sync.Mutex
	rbacCache = map[string]RBAC{}
)

// DeployRBAC renders deploy/csi with the named components of
// deploy/csi/components (e.g. "provisioner-secrets") and returns its RBAC.
func DeployRBAC(t T, components ...string) RBAC {
	t.Helper()
	key := strings.Join(components, ",")
	rbacMu.Lock()
	defer rbacMu.Unlock()
	if r, ok := rbacCache[key]; ok {
		return r
	}
	data, err := RenderDeploy(components...)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseRBAC(data)
	if err != nil {
		t.Fatal(err)
	}
	rbacCache[key] = r
	return r
}

// RenderDeploy is `kubectl kustomize deploy/csi`, with the named
// components of deploy/csi/components.
func RenderDeploy(components ...string) ([]byte, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	kubectl, err := Tool("kubectl")
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, "deploy", "csi")
	if len(components) > 0 {
		// kustomize takes relative paths only: a copy of deploy/ and a
		// kustomization beside it.
		tmp, err := os.MkdirTemp("", "deploy")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		if err := os.CopyFS(filepath.Join(tmp, "deploy"), os.DirFS(filepath.Join(root, "deploy"))); err != nil {
			return nil, err
		}
		k := "resources: [../deploy/csi]\ncomponents:\n"
		for _, c := range components {
			k += "  - ../deploy/csi/components/" + c + "\n"
		}
		dir = filepath.Join(tmp, "render")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
			return nil, err
		}
	}
	out, err := exec.Command(kubectl, "kustomize", dir).Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return nil, fmt.Errorf("kubectl kustomize %s: %v\n%s", dir, err, exit.Stderr)
	}
	return out, err
}

// ParseRBAC reads the ServiceAccounts' rules out of a YAML stream of
// ClusterRoles, Roles and their bindings (other objects are skipped).
func ParseRBAC(data []byte) (RBAC, error) {
	type object struct {
		Kind     string                           `json:"kind"`
		Metadata struct{ Name, Namespace string } `json:"metadata"`
		Rules    []rbacv1.PolicyRule              `json:"rules"`
		RoleRef  rbacv1.RoleRef                   `json:"roleRef"`
		Subjects []rbacv1.Subject                 `json:"subjects"`
	}
	var objs []object
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var o object
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return RBAC{}, err
		}
		objs = append(objs, o)
	}
	rules := map[string][]rbacv1.PolicyRule{} // "ClusterRole/name" or "Role/ns/name"
	for _, o := range objs {
		switch o.Kind {
		case "ClusterRole":
			rules["ClusterRole/"+o.Metadata.Name] = o.Rules
		case "Role":
			rules["Role/"+o.Metadata.Namespace+"/"+o.Metadata.Name] = o.Rules
		}
	}
	r := RBAC{Cluster: map[string][]rbacv1.PolicyRule{}, Own: map[string][]rbacv1.PolicyRule{}}
	for _, o := range objs {
		if o.Kind != "ClusterRoleBinding" && o.Kind != "RoleBinding" {
			continue
		}
		ref := "ClusterRole/" + o.RoleRef.Name
		if o.RoleRef.Kind == "Role" {
			ref = "Role/" + o.Metadata.Namespace + "/" + o.RoleRef.Name
		}
		granted, ok := rules[ref]
		if !ok {
			return RBAC{}, fmt.Errorf("%s %s binds %s, which the bundle does not hold", o.Kind, o.Metadata.Name, ref)
		}
		for _, s := range o.Subjects {
			if s.Kind != rbacv1.ServiceAccountKind {
				continue
			}
			switch {
			case o.Kind == "ClusterRoleBinding":
				r.Cluster[s.Name] = append(r.Cluster[s.Name], granted...)
			case o.Metadata.Namespace == s.Namespace:
				r.Own[s.Name] = append(r.Own[s.Name], granted...)
			}
		}
	}
	return r, nil
}

// The API server of every cluster writes an audit log (auditLogName in
// its folder) of the requests of users in auditedGroup
// (RBACCheckedKubeconfig's users), and of everyone's lists and watches of
// claims and PVs (StorageListsAndWatches), which are few: nothing else is
// recorded, so that the log costs the benchmarks nothing.
const (
	auditedGroup = "tether:rbac-checked"
	auditLogName = "audit.log"
	auditPolicy  = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    userGroups: ["` + auditedGroup + `"]
  - level: Metadata
    verbs: ["list", "watch"]
    resources:
      - group: ""
        resources: ["persistentvolumeclaims", "persistentvolumes"]
  - level: None
`
)

// configureAudit sets the API server's audit flags; the policy file goes
// in dir.
func configureAudit(api *envtest.APIServer, dir string) error {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return err
	}
	api.Configure().Set("audit-policy-file", policy)
	api.Configure().Set("audit-log-path", filepath.Join(dir, auditLogName))
	// Written before the response: a request is in the log once it has
	// returned.
	api.Configure().Set("audit-log-mode", "blocking")
	return nil
}

var checkedUsers atomic.Int64

// RBACCheckedKubeconfig writes a kubeconfig with which a component of
// tether runs as an administrator, as the integration tests run it, and
// returns its path. Every request made with it is recorded by the API
// server, and when the test ends each must be one that deploy/csi's RBAC
// (with the named optional components) allows the ServiceAccount sa; the
// test fails naming those it does not. The component runs unhindered: a
// request made only on a rare path is still made, and reported, rather
// than refused and retried quietly.
func (c *Cluster) RBACCheckedKubeconfig(t T, sa string, components ...string) string {
	t.Helper()
	user := fmt.Sprintf("tether-checked-%s-%d", sa, checkedUsers.Add(1))
	u, err := c.env.AddUser(envtest.User{Name: user, Groups: []string{"system:masters", auditedGroup}}, nil)
	if err != nil {
		t.Fatalf("add user %s: %v", user, err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(c.Dir, user+".kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	rbac := DeployRBAC(t, components...)
	t.Cleanup(func() {
		// Registered before the component starts, so run after it stopped.
		denied, n, err := c.deniedRequests(user, sa, rbac)
		if err != nil {
			t.Errorf("reading the audit log: %v", err)
			return
		}
		t.Logf("%d audit events of requests made as %s checked against deploy/csi's RBAC", n, sa)
		for _, d := range denied {
			t.Errorf("deploy/csi's RBAC does not let %s do what it did: %s", sa, d)
		}
	})
	return path
}

// auditEvent is what the check reads of an audit.k8s.io/v1 Event.
type auditEvent struct {
	RequestURI string `json:"requestURI"`
	Verb       string `json:"verb"`
	Stage      string `json:"stage"`
	UserAgent  string `json:"userAgent"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource, Namespace, APIGroup, Subresource string
	} `json:"objectRef"`
}

// Paths every authenticated user may get (the system:discovery and
// system:public-info-viewer roles).
var discoveryPaths = []string{"/api", "/apis", "/version", "/healthz", "/livez", "/readyz", "/openapi"}

// deniedRequests reads the audit log for user's requests and returns, for
// each kind of request sa may not make, a line with its count and one
// example; and how many audit events of user it read.
func (c *Cluster) deniedRequests(user, sa string, rbac RBAC) ([]string, int, error) {
	f, err := os.Open(filepath.Join(c.Dir, auditLogName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil // nothing was recorded
	} else if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	type seen struct {
		n       int
		example string
	}
	denied := map[string]*seen{}
	n := 0
	r := bufio.NewReaderSize(f, 64*1024)
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			// A last line without its newline is being written (a watch
			// of the stopped component ending): its request was logged
			// when it started.
			break
		} else if err != nil {
			return nil, 0, err
		}
		if !bytes.Contains(line, []byte(`"`+user+`"`)) {
			continue
		}
		var ev auditEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, 0, err
		}
		if ev.User.Username != user {
			continue
		}
		n++
		var key string
		if ev.ObjectRef == nil {
			path, _, _ := strings.Cut(ev.RequestURI, "?")
			if ev.Verb == "get" && slices.ContainsFunc(discoveryPaths, func(p string) bool { return path == p || strings.HasPrefix(path, p+"/") }) {
				continue
			}
			key = ev.Verb + " " + path
		} else {
			req := APIRequest{Verb: ev.Verb, Group: ev.ObjectRef.APIGroup, Resource: ev.ObjectRef.Resource,
				Subresource: ev.ObjectRef.Subresource, Namespaced: ev.ObjectRef.Namespace != ""}
			if rbac.Allows(sa, req) {
				continue
			}
			key = req.String()
		}
		if denied[key] == nil {
			denied[key] = &seen{example: ev.RequestURI}
		}
		denied[key].n++
	}
	var out []string
	for key, s := range denied {
		out = append(out, fmt.Sprintf("%s (%d times, e.g. %s)", key, s.n, s.example))
	}
	sort.Strings(out)
	return out, n, nil
}
