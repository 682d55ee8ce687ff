#!/usr/bin/env bash
# make lint: gofmt, go vet, staticcheck, actionlint, go.mod tidy with honest
# `// indirect` marks, and one writer per object (hack/writers: claims and
# PVs are written only in the files hack/writers/allow.txt lists). Runs on a fresh machine with only the Go module proxy:
# staticcheck and actionlint are built by `go run` at pinned versions (cached
# by Go). actionlint checks .github/workflows, and the shell of their run:
# steps with shellcheck where shellcheck is installed (Debian's shellcheck).
# hack/tools is a module of its own (its tools.go imports main packages), so
# ./... here does not reach it.
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
STATICCHECK=${STATICCHECK:-honnef.co/go/tools/cmd/staticcheck@v0.8.2}
ACTIONLINT=${ACTIONLINT:-github.com/rhysd/actionlint/cmd/actionlint@v1.7.12}
status=0
fail() { echo "lint: $*" >&2; status=1; }

echo "== gofmt"
out=$(gofmt -l $(git ls-files '*.go'))
[ -z "$out" ] || fail "gofmt would change:"$'\n'"$out"

echo "== go vet"
"$GO" vet ./... || fail "go vet"

echo "== staticcheck ($STATICCHECK)"
"$GO" run "$STATICCHECK" ./... || fail "staticcheck"

echo "== actionlint ($ACTIONLINT$(command -v shellcheck >/dev/null || echo ', without shellcheck'))"
"$GO" run "$ACTIONLINT" || fail "actionlint: .github/workflows"

echo "== one writer per object (hack/writers/allow.txt)"
"$GO" run ./hack/writers || fail "a claim or PV written outside the files hack/writers/allow.txt lists"

echo "== go mod tidy"
if ! diff=$("$GO" mod tidy -diff 2>&1); then
  fail "go.mod/go.sum are not tidy (run go mod tidy):"$'\n'"$diff"
fi

# go mod tidy sets the marks too; this names the culprit: a module marked
# `// indirect` although one of our packages (or tests) imports it directly.
echo "== // indirect marks"
indirect=$("$GO" list -m -f '{{if .Indirect}}{{.Path}}{{end}}' all) || fail "go list -m"
imports=$("$GO" list -f '{{join .Imports "\n"}}
{{join .TestImports "\n"}}
{{join .XTestImports "\n"}}' ./... | sort -u | grep .) || fail "go list imports"
if [ -n "$imports" ]; then
  direct=$("$GO" list -f '{{with .Module}}{{if not .Main}}{{.Path}}{{end}}{{end}}' $imports | sort -u) || fail "go list modules"
  for m in $(comm -12 <(echo "$indirect" | grep . | sort -u) <(echo "$direct" | grep . | sort -u)); do
    fail "go.mod marks $m // indirect, but our code imports it"
  done
fi

[ $status = 0 ] && echo "lint: ok"
exit $status
