package request

import (
	"fmt"
	"regexp"
	"strings"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Deletion needs the provisioner secret after the class may have changed,
// so the resolved reference is kept on the PV, as external-provisioner does.
const (
	AnnDeletionSecretName      = "volume.kubernetes.io/provisioner-deletion-secret-name"
	AnnDeletionSecretNamespace = "volume.kubernetes.io/provisioner-deletion-secret-namespace"
	// AnnModifySecretName and AnnModifySecretNamespace name the class's
	// controller-modify secret on the PV, for the resizer's
	// ControllerModifyVolume (as external-provisioner writes them).
	AnnModifySecretName      = "volume.kubernetes.io/controller-modify-secret-name"
	AnnModifySecretNamespace = "volume.kubernetes.io/controller-modify-secret-namespace"
)

// DeletionSecretRef is the secret a PV's DeleteVolume carries, decided as
// external-provisioner v6.4.0 does:
//   - when the PV has both deletion-secret annotations, they name it, and
//     empty ones (which EP writes on every PV of a class without a
//     provisioner secret) mean no secret;
//   - otherwise (a PV from an older provisioner) the class's provisioner
//     secret (or default secret) is resolved for the PV and its claim;
//     with no class, or no claim reference, there is no secret.
//
// class is nil when the PV's class is gone. Pure.
func DeletionSecretRef(pv *v1.PersistentVolume, class *storagev1.StorageClass) (*v1.SecretReference, error) {
	name, hasName := pv.Annotations[AnnDeletionSecretName]
	ns, hasNS := pv.Annotations[AnnDeletionSecretNamespace]
	if hasName && hasNS {
		if name == "" || ns == "" {
			return nil, nil
		}
		return &v1.SecretReference{Name: name, Namespace: ns}, nil
	}
	if class == nil || pv.Spec.ClaimRef == nil {
		return nil, nil
	}
	secrets, _, errs := parseSecrets(class.Parameters, nil)
	if len(errs) > 0 {
		return nil, fmt.Errorf("the deletion secret of StorageClass %s: %s", class.Name, strings.Join(errs, "; "))
	}
	t, ok := secrets[ProvisionerSecret]
	if !ok {
		return nil, nil
	}
	ref, err := ResolveSecret(t, TemplateVars{PVName: pv.Name, PVCName: pv.Spec.ClaimRef.Name, PVCNamespace: pv.Spec.ClaimRef.Namespace})
	if err != nil {
		return nil, fmt.Errorf("the deletion secret of StorageClass %s: %w", class.Name, err)
	}
	return ref, nil
}

var templateVar = regexp.MustCompile(`\$\{([^}]*)\}`)
var annotationVar = regexp.MustCompile(`^pvc\.annotations\['([^']+)'\]$`)

// TemplateVars are the values a secret template may use.
type TemplateVars struct {
	PVName, PVCName, PVCNamespace string
	PVCAnnotations                map[string]string
}

// ResolveSecret turns a class's secret template into a secret reference.
// A name may use ${pv.name}, ${pvc.name}, ${pvc.namespace} and
// ${pvc.annotations['key']}; a namespace only ${pv.name} and
// ${pvc.namespace}, so that a claim's author cannot point the provisioner
// at another namespace's secrets.
func ResolveSecret(t SecretTemplate, vars TemplateVars) (*v1.SecretReference, error) {
	ns, err := resolve(t.Namespace, vars, false)
	if err != nil {
		return nil, fmt.Errorf("secret namespace template %q: %w", t.Namespace, err)
	}
	name, err := resolve(t.Name, vars, true)
	if err != nil {
		return nil, fmt.Errorf("secret name template %q: %w", t.Name, err)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return nil, fmt.Errorf("secret namespace %q (from %q) is not valid: %s", ns, t.Namespace, strings.Join(errs, ", "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("secret name %q (from %q) is not valid: %s", name, t.Name, strings.Join(errs, ", "))
	}
	return &v1.SecretReference{Name: name, Namespace: ns}, nil
}

func resolve(tmpl string, vars TemplateVars, isName bool) (string, error) {
	var errs []string
	out := templateVar.ReplaceAllStringFunc(tmpl, func(m string) string {
		v := templateVar.FindStringSubmatch(m)[1]
		switch {
		case v == "pv.name":
			return vars.PVName
		case v == "pvc.namespace":
			return vars.PVCNamespace
		case v == "pvc.name" && isName:
			return vars.PVCName
		case isName && annotationVar.MatchString(v):
			key := annotationVar.FindStringSubmatch(v)[1]
			val, ok := vars.PVCAnnotations[key]
			if !ok {
				errs = append(errs, fmt.Sprintf("the claim has no annotation %q", key))
			}
			return val
		default:
			errs = append(errs, fmt.Sprintf("${%s} is not allowed here", v))
			return ""
		}
	})
	if len(errs) > 0 {
		return "", fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return out, nil
}

// SecretData turns a Secret into the map CSI calls carry.
func SecretData(s *v1.Secret) map[string]string {
	out := make(map[string]string, len(s.Data)+len(s.StringData))
	for k, v := range s.Data {
		out[k] = string(v)
	}
	for k, v := range s.StringData {
		out[k] = v
	}
	return out
}
