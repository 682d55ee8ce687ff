package release

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// ProvenanceFile is a release's provenance statement. SHA256SUMS does not
// list it: it lists SHA256SUMS and every file SHA256SUMS lists.
const ProvenanceFile = "provenance.intoto.json"

// SLSA provenance v1's predicate type, and the build type of `make
// release`, defined in docs/release.md.
const (
	PredicateSLSAProvenance = "https://slsa.dev/provenance/v1"
	BuildType               = Source + "/blob/main/docs/release.md#provenance"
	BuilderID               = Source + "/tree/main/hack/release"
)

// ProvenanceSpec is what a release's provenance says.
type ProvenanceSpec struct {
	// Sums is the release's SHA256SUMS: every file it lists, and
	// SHA256SUMS itself, are the statement's subjects.
	Sums                        []byte
	Version, Revision, Registry string
	Platforms                   []string // os/arch, in build order
	GoVersion                   string   // the toolchain's (go env GOVERSION)
	GoMod, GoSum                []byte   // the module graph
	SourceDateEpoch             int64    // the images' and SBOMs' time
}

// ParseSums reads SHA256SUMS (`<hex>  <name>` lines) into name → digest.
func ParseSums(sums []byte) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		digest, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || !hexOf(digest, 64) || name == "" || out[name] != "" {
			return nil, fmt.Errorf("SHA256SUMS: line %q", sc.Text())
		}
		out[name] = digest
	}
	return out, sc.Err()
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Provenance is the in-toto Statement v1 with an SLSA provenance v1
// predicate of a release: its subjects are the files of SHA256SUMS and
// SHA256SUMS itself (by name, sorted); the build definition is `make
// release` of the commit with its parameters; the resolved dependencies
// are the source commit, the Go toolchain and the module graph (go.mod's
// and go.sum's SHA-256; each module is in the images' SBOMs). It holds no
// time of its own build and no host name, so two builds of a commit give
// the same bytes. The statement is not signed.
func Provenance(s ProvenanceSpec) ([]byte, error) {
	sums, err := ParseSums(s.Sums)
	if err != nil {
		return nil, err
	}
	sums["SHA256SUMS"] = sha256Hex(s.Sums)
	names := make([]string, 0, len(sums))
	for n := range sums {
		names = append(names, n)
	}
	sort.Strings(names)
	var subjects []*intoto.ResourceDescriptor
	for _, n := range names {
		subjects = append(subjects, &intoto.ResourceDescriptor{Name: n, Digest: map[string]string{"sha256": sums[n]}})
	}
	platforms := make([]any, len(s.Platforms))
	for i, p := range s.Platforms {
		platforms[i] = p
	}
	external, err := structpb.NewStruct(map[string]any{
		"command":   fmt.Sprintf("make release VERSION=%s IMAGE_REGISTRY=%s IMAGE_PLATFORMS=%s", s.Version, s.Registry, strings.Join(s.Platforms, ",")),
		"version":   s.Version,
		"registry":  s.Registry,
		"platforms": platforms,
		"source":    map[string]any{"uri": "git+" + Source, "digest": map[string]any{"gitCommit": s.Revision}},
	})
	if err != nil {
		return nil, err
	}
	internal, err := structpb.NewStruct(map[string]any{"SOURCE_DATE_EPOCH": fmt.Sprint(s.SourceDateEpoch)})
	if err != nil {
		return nil, err
	}
	pred := &slsa.Provenance{
		BuildDefinition: &slsa.BuildDefinition{
			BuildType:          BuildType,
			ExternalParameters: external,
			InternalParameters: internal,
			ResolvedDependencies: []*intoto.ResourceDescriptor{
				{Uri: "git+" + Source + "@" + s.Revision, Digest: map[string]string{"gitCommit": s.Revision}},
				{Name: s.GoVersion, Uri: "https://go.dev/dl/#" + s.GoVersion},
				{Name: "go.mod", Uri: "git+" + Source + "@" + s.Revision + "#go.mod", Digest: map[string]string{"sha256": sha256Hex(s.GoMod)}},
				{Name: "go.sum", Uri: "git+" + Source + "@" + s.Revision + "#go.sum", Digest: map[string]string{"sha256": sha256Hex(s.GoSum)}},
			},
		},
		RunDetails: &slsa.RunDetails{
			Builder: &slsa.Builder{Id: BuilderID, Version: map[string]string{"tether-release": s.Version, "go": s.GoVersion}},
		},
	}
	if err := pred.Validate(); err != nil {
		return nil, err
	}
	predJSON, err := protojson.Marshal(pred)
	if err != nil {
		return nil, err
	}
	predStruct := &structpb.Struct{}
	if err := protojson.Unmarshal(predJSON, predStruct); err != nil {
		return nil, err
	}
	st := &intoto.Statement{Type: intoto.StatementTypeUri, Subject: subjects, PredicateType: PredicateSLSAProvenance, Predicate: predStruct}
	if err := st.Validate(); err != nil {
		return nil, err
	}
	raw, err := protojson.Marshal(st)
	if err != nil {
		return nil, err
	}
	// protojson's whitespace is deliberately unstable; its field and map
	// key order is not. Compact and indent it for stable bytes.
	var compact, out bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, err
	}
	if err := json.Indent(&out, compact.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// ValidateProvenance reads a statement with the in-toto attestation
// library (unknown fields refused) and validates it with its Validate
// methods: the Statement v1 (type, subjects with well-formed digests,
// predicate) and, as SLSA provenance v1 (the predicate type), the
// predicate (build type, external parameters, builder id, resource
// descriptors).
func ValidateProvenance(data []byte) (*intoto.Statement, *slsa.Provenance, error) {
	st := &intoto.Statement{}
	if err := protojson.Unmarshal(data, st); err != nil {
		return nil, nil, fmt.Errorf("in-toto statement: %w", err)
	}
	if err := st.Validate(); err != nil {
		return nil, nil, fmt.Errorf("in-toto statement: %w", err)
	}
	if st.GetType() != intoto.StatementTypeUri || st.GetPredicateType() != PredicateSLSAProvenance {
		return nil, nil, fmt.Errorf("statement %s of %s, want %s of %s", st.GetType(), st.GetPredicateType(), intoto.StatementTypeUri, PredicateSLSAProvenance)
	}
	raw, err := protojson.Marshal(st.GetPredicate())
	if err != nil {
		return nil, nil, err
	}
	pred := &slsa.Provenance{}
	if err := protojson.Unmarshal(raw, pred); err != nil {
		return nil, nil, fmt.Errorf("SLSA provenance: %w", err)
	}
	if err := pred.Validate(); err != nil {
		return nil, nil, fmt.Errorf("SLSA provenance: %w", err)
	}
	return st, pred, nil
}

// CheckSubjects fails unless a statement's subjects are exactly the files
// of SHA256SUMS with its digests, and SHA256SUMS with its own.
func CheckSubjects(st *intoto.Statement, sums []byte) error {
	want, err := ParseSums(sums)
	if err != nil {
		return err
	}
	want["SHA256SUMS"] = sha256Hex(sums)
	got := map[string]string{}
	for _, s := range st.GetSubject() {
		got[s.GetName()] = s.GetDigest()["sha256"]
	}
	var diff []string
	for n, d := range want {
		if got[n] != d {
			diff = append(diff, fmt.Sprintf("%s: sha256 %q, SHA256SUMS says %s", n, got[n], d))
		}
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			diff = append(diff, n+": not in SHA256SUMS")
		}
	}
	if len(diff) > 0 {
		sort.Strings(diff)
		return fmt.Errorf("provenance subjects: %s", strings.Join(diff, "; "))
	}
	return nil
}

// WriteProvenance writes dir's ProvenanceFile after WriteSums wrote its
// SHA256SUMS, for the tree at root (its commit, go.mod and go.sum, and the
// toolchain `go env GOVERSION` names there).
func WriteProvenance(ctx context.Context, root, dir string, s ProvenanceSpec) error {
	revision, created, err := commit(ctx, root)
	if err != nil {
		return err
	}
	s.Revision, s.SourceDateEpoch = revision, created.Unix()
	if s.Sums, err = os.ReadFile(filepath.Join(dir, "SHA256SUMS")); err != nil {
		return err
	}
	if s.GoMod, err = os.ReadFile(filepath.Join(root, "go.mod")); err != nil {
		return err
	}
	if s.GoSum, err = os.ReadFile(filepath.Join(root, "go.sum")); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "env", "GOVERSION")
	cmd.Dir = root
	v, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go env GOVERSION: %w", err)
	}
	s.GoVersion = strings.TrimSpace(string(v))
	data, err := Provenance(s)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ProvenanceFile), data, 0o644)
}
