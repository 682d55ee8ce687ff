package cli

import (
	"errors"
	"flag"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The flag package's syntax errors that name a flag, and its value.
var (
	invalidValue = regexp.MustCompile(`^invalid (?:boolean )?value "((?:[^"\\]|\\.)*)" for (?:flag )?-(\S+): `)
	notDefined   = regexp.MustCompile(`^flag provided but not defined: -(\S+)$`)
)

// Explain rewrites a syntax error of fs.Parse(args) as a short message
// that stands without the usage: the flag as args spell it (--name or
// -name), what its value must be (a duration needs a unit, e.g. 5s), and,
// for a flag fs does not define, the nearest one fs does and where the
// flags are listed. Another error is returned as it is.
func Explain(fs *flag.FlagSet, args []string, err error) error {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	msg := err.Error()
	if m := invalidValue.FindStringSubmatch(msg); m != nil {
		f := fs.Lookup(m[2])
		if f == nil {
			return err
		}
		value := m[1]
		if v, uerr := strconv.Unquote(`"` + m[1] + `"`); uerr == nil {
			value = v
		}
		return fmt.Errorf("invalid value %q for flag %s: %s", value, spelled(m[2], args), valueHint(f, value, strings.TrimPrefix(msg, m[0])))
	}
	if m := notDefined.FindStringSubmatch(msg); m != nil {
		hint := fmt.Sprintf(" (%s --help lists the flags)", fs.Name())
		if near := nearest(fs, m[1]); near != "" {
			hint = fmt.Sprintf(": did you mean %s?%s", spelled(near, args), hint)
		}
		return fmt.Errorf("unknown flag %s%s", spelled(m[1], args), hint)
	}
	return err
}

// spelled is the flag name with the dashes args give it: --name if an
// argument starts so, else -name.
func spelled(name string, args []string) string {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--"+name || strings.HasPrefix(a, "--"+name+"=") {
			return "--" + name
		}
	}
	if len(name) > 1 && !anySingleDash(args) {
		return "--" + name
	}
	return "-" + name
}

// anySingleDash is whether args spell any flag with one dash (-name).
func anySingleDash(args []string) bool {
	for _, a := range args {
		if a == "--" {
			break
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			return true
		}
	}
	return false
}

// valueHint says what value f takes; setErr is what f's Set said.
func valueHint(f *flag.Flag, value, setErr string) string {
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return setErr
	}
	switch g.Get().(type) {
	case time.Duration:
		if _, err := time.ParseDuration(value); err != nil && strings.Contains(err.Error(), "missing unit") {
			example := "5s"
			if value != "" && strings.Trim(value, "0123456789") == "" {
				example = value + "s"
			}
			return "a duration needs a unit, e.g. " + example
		}
		return "a duration is a number and a unit: 300ms, 5s, 2m, 1h"
	case bool:
		return "a boolean: true or false"
	case int, int64:
		return "a whole number"
	case uint, uint64:
		return "a whole number, 0 or more"
	case float64:
		return "a number"
	}
	return setErr
}

// nearest is the flag of fs that name most likely misspells: the one
// flag name starts, else the one flag within two edits; "" if none is.
func nearest(fs *flag.FlagSet, name string) string {
	var prefixed, close []string
	best := 3
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, name) {
			prefixed = append(prefixed, f.Name)
		}
		switch d := editDistance(name, f.Name); {
		case d < best:
			best, close = d, []string{f.Name}
		case d == best:
			close = append(close, f.Name)
		}
	})
	switch {
	case len(prefixed) == 1:
		return prefixed[0]
	case len(prefixed) == 0 && len(close) == 1:
		return close[0]
	}
	return ""
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
