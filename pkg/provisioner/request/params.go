package request

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The reserved StorageClass parameter keys, as external-provisioner reads them.
const (
	reservedPrefix = "csi.storage.k8s.io/"

	keyFSType           = reservedPrefix + "fstype"
	keyDeprecatedFSType = "fstype"

	KeyPVCName      = reservedPrefix + "pvc/name"
	KeyPVCNamespace = reservedPrefix + "pvc/namespace"
	KeyPVName       = reservedPrefix + "pv/name"
)

// SecretKind is one of the secrets a class can name.
type SecretKind string

// The secrets, by the prefix of their name and namespace keys.
const (
	ProvisionerSecret       SecretKind = "provisioner"
	ControllerPublishSecret SecretKind = "controller-publish"
	NodeStageSecret         SecretKind = "node-stage"
	NodePublishSecret       SecretKind = "node-publish"
	ControllerExpandSecret  SecretKind = "controller-expand"
	NodeExpandSecret        SecretKind = "node-expand"
	// ControllerModifySecret is for ControllerModifyVolume (the resizer's).
	ControllerModifySecret SecretKind = "controller-modify"
)

// AllSecretKinds lists every secret kind.
var AllSecretKinds = []SecretKind{ProvisionerSecret, ControllerPublishSecret, NodeStageSecret, NodePublishSecret, ControllerExpandSecret, NodeExpandSecret, ControllerModifySecret}

// The default secret: for every kind the class names no secret for.
const (
	keyDefaultSecretName      = reservedPrefix + "secret-name"
	keyDefaultSecretNamespace = reservedPrefix + "secret-namespace"
)

func (k SecretKind) nameKey() string      { return reservedPrefix + string(k) + "-secret-name" }
func (k SecretKind) namespaceKey() string { return reservedPrefix + string(k) + "-secret-namespace" }

// deprecatedSecretKeys are the keys of the first CSI releases, outside the
// reserved namespace (so the driver gets them too), as external-provisioner
// still reads them: case-sensitive, with a deprecation warning.
var deprecatedSecretKeys = map[SecretKind][2]string{
	ProvisionerSecret:       {"csiProvisionerSecretName", "csiProvisionerSecretNamespace"},
	ControllerPublishSecret: {"csiControllerPublishSecretName", "csiControllerPublishSecretNamespace"},
	NodeStageSecret:         {"csiNodeStageSecretName", "csiNodeStageSecretNamespace"},
	NodePublishSecret:       {"csiNodePublishSecretName", "csiNodePublishSecretNamespace"},
}

// SecretTemplate is a class's (unresolved) reference to a secret.
type SecretTemplate struct {
	Name, Namespace string
}

// ClassParams are a class's parameters, split into the reserved keys that
// the provisioner reads and the rest, which go to the driver.
type ClassParams struct {
	FSType  string
	Secrets map[SecretKind]SecretTemplate
	// Driver are the parameters passed to CreateVolume.
	Driver map[string]string
	// Warnings name the deprecated keys the class uses.
	Warnings []string
}

// ParseClassParams splits parameters and checks the reserved keys. An
// unknown key in the reserved namespace, or a secret with a name but no
// namespace (or the reverse), is an error: the class is wrong, and
// provisioning with it would surprise its author.
func ParseClassParams(params map[string]string) (ClassParams, error) {
	out := ClassParams{Secrets: map[SecretKind]SecretTemplate{}, Driver: map[string]string{}}
	known := map[string]bool{keyFSType: true, keyDefaultSecretName: true, keyDefaultSecretNamespace: true}
	for _, k := range AllSecretKinds {
		known[k.nameKey()], known[k.namespaceKey()] = true, true
	}
	var errs []string
	// The keys the provisioner reads, by their lower case: two spellings
	// of one would make the result depend on map order.
	spellings := map[string][]string{}
	for key, value := range params {
		lower := strings.ToLower(key)
		switch {
		case lower == keyDeprecatedFSType:
			spellings[lower] = append(spellings[lower], key)
			if out.FSType == "" {
				out.FSType = value
			}
			// Not in the reserved namespace: the driver gets it too, as
			// with external-provisioner.
			out.Driver[key] = value
		case strings.HasPrefix(lower, reservedPrefix):
			spellings[lower] = append(spellings[lower], key)
			if !known[lower] {
				errs = append(errs, fmt.Sprintf("unknown parameter %q in the reserved namespace %s", key, reservedPrefix))
			}
		default:
			out.Driver[key] = value
		}
	}
	for _, keys := range spellings {
		if len(keys) > 1 {
			slices.Sort(keys)
			errs = append(errs, fmt.Sprintf("parameters %q differ only in case", keys))
		}
	}
	if v, ok := lookupFold(params, keyFSType); ok {
		if _, both := lookupFold(params, keyDeprecatedFSType); both {
			errs = append(errs, fmt.Sprintf("%s and the deprecated %s cannot both be set", keyFSType, keyDeprecatedFSType))
		}
		out.FSType = v
	}
	if _, ok := lookupFold(params, keyDeprecatedFSType); ok {
		out.Warnings = append(out.Warnings, deprecation(keyDeprecatedFSType, keyFSType))
	}
	var secretErrs []string
	out.Secrets, out.Warnings, secretErrs = parseSecrets(params, out.Warnings)
	errs = append(errs, secretErrs...)
	if len(errs) > 0 {
		slices.Sort(errs)
		return ClassParams{}, fmt.Errorf("invalid StorageClass parameters: %s", strings.Join(errs, "; "))
	}
	return out, nil
}

// parseSecrets reads every kind's secret template as external-provisioner
// does: the kind's key pair, or its deprecated pair (with a warning), not
// both; with neither, the default pair (csi.storage.k8s.io/secret-name and
// -namespace). Name and namespace go together and are not empty.
func parseSecrets(params map[string]string, warnings []string) (map[SecretKind]SecretTemplate, []string, []string) {
	out := map[SecretKind]SecretTemplate{}
	var errs []string
	pair := func(nameKey, nsKey string, fold bool) (t SecretTemplate, set bool) {
		lookup := lookupFold
		if !fold {
			lookup = func(m map[string]string, k string) (string, bool) { v, ok := m[k]; return v, ok }
		}
		name, hasName := lookup(params, nameKey)
		ns, hasNS := lookup(params, nsKey)
		switch {
		case hasName != hasNS:
			errs = append(errs, fmt.Sprintf("%s and %s must be set together", nameKey, nsKey))
		case hasName && (name == "" || ns == ""):
			errs = append(errs, fmt.Sprintf("%s and %s must not be empty", nameKey, nsKey))
		case hasName:
			return SecretTemplate{Name: name, Namespace: ns}, true
		}
		return SecretTemplate{}, hasName || hasNS
	}
	def, hasDefault := pair(keyDefaultSecretName, keyDefaultSecretNamespace, true)
	for _, k := range AllSecretKinds {
		t, set := pair(k.nameKey(), k.namespaceKey(), true)
		if dep, ok := deprecatedSecretKeys[k]; ok {
			for i, instead := range []string{k.nameKey(), k.namespaceKey()} {
				if _, ok := params[dep[i]]; ok {
					warnings = append(warnings, deprecation(dep[i], instead))
				}
			}
			dt, dset := pair(dep[0], dep[1], false)
			switch {
			case set && dset:
				errs = append(errs, fmt.Sprintf("the %s secret is named both by %s and by the deprecated %s", k, k.nameKey(), dep[0]))
			case dset:
				t, set = dt, true
			}
		}
		switch {
		case set && t != (SecretTemplate{}):
			out[k] = t
		case !set && hasDefault && def != (SecretTemplate{}):
			out[k] = def
		}
	}
	return out, warnings, errs
}

// deprecation is external-provisioner's warning for a deprecated key.
func deprecation(key, instead string) string {
	return fmt.Sprintf("%q is deprecated and will be removed in a future release, please use %q instead", key, instead)
}

// lookupFold finds a lower-case key case-insensitively, by the same rule
// (strings.ToLower) that ParseClassParams sorts keys with.
func lookupFold(m map[string]string, key string) (string, bool) {
	for k, v := range m {
		if strings.ToLower(k) == key {
			return v, true
		}
	}
	return "", false
}

// withMetadata adds the claim and PV names for --extra-create-metadata.
func withMetadata(driver map[string]string, pvcNamespace, pvcName, pvName string) map[string]string {
	out := maps.Clone(driver)
	if out == nil {
		out = map[string]string{}
	}
	out[KeyPVCName], out[KeyPVCNamespace], out[KeyPVName] = pvcName, pvcNamespace, pvName
	return out
}
