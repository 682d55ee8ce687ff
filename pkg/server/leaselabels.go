package server

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// LeaseLabels is the value of external-provisioner's
// --leader-election-labels: key:value pairs separated by commas, each
// occurrence of the flag adding to the same map, as csi-lib-utils'
// standardflags parses it (an item that is not exactly one key and one
// value, the empty string included, is an error).
type LeaseLabels map[string]string

// labelsFlag is the flag.Value that fills a LeaseLabels.
type labelsFlag struct{ m *LeaseLabels }

func (l labelsFlag) String() string {
	if l.m == nil || len(*l.m) == 0 {
		return ""
	}
	var items []string
	for _, k := range slices.Sorted(maps.Keys(*l.m)) {
		items = append(items, k+":"+(*l.m)[k])
	}
	return strings.Join(items, ",")
}

func (l labelsFlag) Set(v string) error {
	for _, item := range strings.Split(v, ",") {
		parts := strings.Split(item, ":")
		if len(parts) != 2 {
			return fmt.Errorf("malformed item in list of labels: %s", item)
		}
		if *l.m == nil {
			*l.m = LeaseLabels{}
		}
		(*l.m)[parts[0]] = parts[1]
	}
	return nil
}

// Check says which labels the API server would refuse on the Lease: a key
// that is not a qualified name, a value that is not a label value.
func (l LeaseLabels) Check() error {
	var errs []string
	for _, k := range slices.Sorted(maps.Keys(l)) {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, fmt.Sprintf("key %q: %s", k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(l[k]) {
			errs = append(errs, fmt.Sprintf("value %q of %s: %s", l[k], k, msg))
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}
