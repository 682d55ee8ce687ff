package main

import (
	"fmt"
	"slices"
	"strings"
)

// Kinds of object the check covers, as allow.txt names them.
const (
	kindClaim  = "pvc"
	kindVolume = "pv"
)

// kindNames are the objects' names in messages.
var kindNames = map[string]string{kindClaim: "PersistentVolumeClaim", kindVolume: "PersistentVolume"}

// allowList maps a kind to the files (slash-separated, from the
// repository's root) that may write it.
type allowList map[string][]string

// parseAllow reads allow.txt: one `<kind> <file>` a line, kind pvc or pv;
// `#` starts a comment; blank lines are ignored.
func parseAllow(text string) (allowList, error) {
	allow := allowList{}
	for i, line := range strings.Split(text, "\n") {
		if c := strings.IndexByte(line, '#'); c >= 0 {
			line = line[:c]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 2 {
			return nil, fmt.Errorf("line %d: want `<kind> <file>`, got %q", i+1, strings.TrimSpace(line))
		}
		kind, file := fields[0], fields[1]
		if _, ok := kindNames[kind]; !ok {
			return nil, fmt.Errorf("line %d: kind %q is neither %s nor %s", i+1, kind, kindClaim, kindVolume)
		}
		if slices.Contains(allow[kind], file) {
			return nil, fmt.Errorf("line %d: %s %s listed twice", i+1, kind, file)
		}
		allow[kind] = append(allow[kind], file)
	}
	return allow, nil
}

// judge returns one message for each write in a file the allow-list does
// not permit for its kind, and one for each entry naming a file that does
// not exist (exists says whether a path does).
func judge(writes []write, allow allowList, exists func(string) bool) []string {
	var out []string
	for _, w := range writes {
		if slices.Contains(allow[w.kind], w.file) {
			continue
		}
		may := "none"
		if files := allow[w.kind]; len(files) > 0 {
			may = strings.Join(files, ", ")
		}
		out = append(out, fmt.Sprintf("%s:%d: writes a %s (%s); only these files may: %s",
			w.file, w.line, kindNames[w.kind], w.method, may))
	}
	for _, kind := range []string{kindClaim, kindVolume} {
		for _, file := range allow[kind] {
			if !exists(file) {
				out = append(out, fmt.Sprintf("allow-list: %s %s: no such file (moved? move its entry)", kind, file))
			}
		}
	}
	return out
}
