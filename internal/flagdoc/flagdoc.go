package flagdoc

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2"
)

// CheckREADME fails t for every problem Check finds in the document at
// path (the name dates from when the flags were in the README).
func CheckREADME(t *testing.T, fs *flag.FlagSet, path string) {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	problems := Check(fs, string(doc))
	for _, p := range problems {
		t.Errorf("%s: %s", path, p)
	}
}

// Row is one row of a flag table.
type Row struct {
	Line     int      // 1-based line number in the document
	Flags    []string // the flags it names, without dashes
	Defaults []string // its default cell split at top-level commas; nil when empty
}

var (
	flagName = regexp.MustCompile("`(-{1,2}[a-zA-Z0-9][a-zA-Z0-9_-]*)`")
	number   = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)
)

// Rows returns the rows of every flag table of doc.
func Rows(doc string) []Row {
	var rows []Row
	inTable := false
	for i, line := range strings.Split(doc, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			inTable = false
			continue
		}
		cells := Cells(line)
		if len(cells) >= 2 && strings.EqualFold(cells[0], "flag") && strings.EqualFold(cells[1], "default") {
			inTable = true
			continue
		}
		if !inTable || isDelimiter(cells) {
			continue
		}
		r := Row{Line: i + 1}
		for _, m := range flagName.FindAllStringSubmatch(cells[0], -1) {
			r.Flags = append(r.Flags, strings.TrimLeft(m[1], "-"))
		}
		if len(cells) > 1 {
			r.Defaults = SplitTop(cells[1])
		}
		rows = append(rows, r)
	}
	return rows
}

// Cells splits a Markdown table row into its trimmed cells (an escaped
// \| stays in its cell).
func Cells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	if strings.HasSuffix(line, "|") && !strings.HasSuffix(line, `\|`) {
		line = line[:len(line)-1]
	}
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cur.WriteByte('|')
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(line[i])
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

func isDelimiter(cells []string) bool {
	for _, c := range cells {
		if strings.Trim(c, ":-") != "" {
			return false
		}
	}
	return true
}

// SplitTop splits s at the commas outside backticks and parentheses, and
// trims each part; nil for a blank s.
func SplitTop(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	var parts []string
	depth, code, start := 0, false, 0
	for i, c := range s {
		switch {
		case c == '`':
			code = !code
		case code:
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == ',' && depth == 0:
			parts = append(parts, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	return append(parts, strings.TrimSpace(s[start:]))
}

// Check returns what the flag tables of doc get wrong about fs: a flag
// (klog's aside) in no row, a row naming a flag fs does not have, a flag
// in two rows, a row whose defaults are not one per flag, and a default
// that does not match (see the package's rules).
func Check(fs *flag.FlagSet, doc string) []string {
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	isKlog := func(name string) bool { return klogFlags.Lookup(name) != nil }

	var problems []string
	seen := map[string]int{}
	for _, r := range Rows(doc) {
		if len(r.Flags) == 0 {
			problems = append(problems, fmt.Sprintf("line %d: a flag table row names no `--flag`", r.Line))
			continue
		}
		allKlog := true
		for _, name := range r.Flags {
			allKlog = allKlog && isKlog(name)
			if fs.Lookup(name) == nil {
				problems = append(problems, fmt.Sprintf("line %d: --%s is documented but is not a flag", r.Line, name))
			}
			if prev, ok := seen[name]; ok {
				problems = append(problems, fmt.Sprintf("line %d: --%s is already in the row of line %d", r.Line, name, prev))
			}
			seen[name] = r.Line
		}
		if allKlog {
			continue
		}
		if len(r.Defaults) != len(r.Flags) {
			problems = append(problems, fmt.Sprintf("line %d: %d flags (%s) but %d defaults %q: give one default per flag, in order",
				r.Line, len(r.Flags), strings.Join(r.Flags, ", "), len(r.Defaults), r.Defaults))
			continue
		}
		for i, name := range r.Flags {
			f := fs.Lookup(name)
			if f == nil {
				continue
			}
			if err := Match(f, r.Defaults[i]); err != nil {
				problems = append(problems, fmt.Sprintf("line %d: --%s: %v", r.Line, name, err))
			}
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := seen[f.Name]; !ok && !isKlog(f.Name) {
			problems = append(problems, fmt.Sprintf("--%s is in no row of the flag table", f.Name))
		}
	})
	return problems
}

// Match says whether the documented default d is f's default, by the
// package's rules.
func Match(f *flag.Flag, d string) error {
	d = strings.TrimSpace(d)
	def := f.DefValue
	var value any
	if g, ok := f.Value.(flag.Getter); ok {
		value = g.Get()
	}
	isBool := false
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		isBool = true
		if def == "" {
			def = "false"
		}
	}
	quoted := len(d) >= 2 && strings.HasPrefix(d, "`") && strings.HasSuffix(d, "`") && strings.Count(d, "`") == 2
	lit := d
	if quoted {
		lit = d[1 : len(d)-1]
	}
	if lit == `""` {
		lit, quoted = "", true
	}
	fail := func(what string) error {
		return fmt.Errorf("documented default %s %s, the flag's default is %q", d, what, f.DefValue)
	}
	_, isDuration := value.(time.Duration)
	switch {
	case d == "":
		return fmt.Errorf("no default documented (the flag's is %q; write `\"\"` for an empty one)", f.DefValue)
	case isDuration && !quoted:
		want, err := time.ParseDuration(def)
		if err != nil {
			return fmt.Errorf("the flag's default %q is not a duration: %v", def, err)
		}
		got, err := time.ParseDuration(lit)
		if err != nil {
			if isWords(lit) && def == "" {
				return nil
			}
			return fail("is not a duration")
		}
		if got != want {
			return fail("is another duration")
		}
		return nil
	case isBool && !quoted:
		if lit != "true" && lit != "false" {
			return fail("is not true or false")
		}
		if lit != def {
			return fail("differs")
		}
		return nil
	case !quoted && number.MatchString(lit):
		got, err1 := strconv.ParseFloat(lit, 64)
		want, err2 := strconv.ParseFloat(def, 64)
		if err1 != nil || err2 != nil || got != want {
			return fail("is another number")
		}
		return nil
	case !quoted && isWords(lit):
		if def != "" {
			return fail("is in words, which stands for an empty default")
		}
		return nil
	}
	if lit != def {
		return fail("differs")
	}
	return nil
}

// isWords says whether an unquoted default is a description rather than
// a value: not a number, a duration or a boolean.
func isWords(s string) bool {
	if s == "true" || s == "false" || number.MatchString(s) {
		return false
	}
	if _, err := time.ParseDuration(s); err == nil {
		return false
	}
	return true
}
