package provisioner

import (
	"fmt"
	"regexp"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Deletion needs the provisioner secret after the class may have changed,
// so the resolved reference is kept on the PV, as external-provisioner does.
const (
	AnnDeletionSecretName      = "volume.kubernetes.io/provisioner-deletion-secret-name"
	AnnDeletionSecretNamespace = "volume.kubernetes.io/provisioner-deletion-secret-namespace"
)

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
