package scope

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// claimPage is a page of n claims, each with something in every part.
func claimPage(n int) *v1.PersistentVolumeClaimList {
	list := &v1.PersistentVolumeClaimList{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaimList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next", RemainingItemCount: ptr.To(int64(7))},
	}
	for i := range n {
		c := claim(map[string]string{annSP: driver, "i": fmt.Sprint(i)}, []string{pvcProtection}, fmt.Sprint("pv-", i))
		c.Name, c.Namespace, c.UID, c.ResourceVersion = fmt.Sprint("c", i), "ns", "u", fmt.Sprint(10+i)
		c.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{}}`)}}
		c.Status.Phase = v1.ClaimBound
		list.Items = append(list.Items, *c)
	}
	return list
}

// encode encodes a list as the API server does, with its streaming
// encoder (Kubernetes 1.33 on) or without.
func encode(t *testing.T, list runtime.Object, streaming bool) []byte {
	t.Helper()
	s := protobuf.NewSerializerWithOptions(scheme.Scheme, scheme.Scheme, protobuf.SerializerOptions{StreamingCollectionsEncoding: streaming})
	var b bytes.Buffer
	if err := s.Encode(list, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// read reads a page of claims as StreamPages does.
func read(data []byte) ([]v1.PersistentVolumeClaim, metav1.ListMeta, error) {
	var got []v1.PersistentVolumeClaim
	lm, err := readPage(bufio.NewReader(bytes.NewReader(data)), func(item []byte) error {
		var c v1.PersistentVolumeClaim
		if err := c.Unmarshal(item); err != nil {
			return err
		}
		got = append(got, c)
		return nil
	})
	return got, lm, err
}

func TestReadPageOfEitherEncoder(t *testing.T) {
	for _, n := range []int{0, 1, 3} {
		for _, streaming := range []bool{false, true} {
			want := claimPage(n)
			got, lm, err := read(encode(t, want, streaming))
			if err != nil {
				t.Fatalf("%d claims, streaming %t: %v", n, streaming, err)
			}
			if !equality.Semantic.DeepEqual(lm, want.ListMeta) {
				t.Errorf("%d claims, streaming %t: list metadata %+v, want %+v", n, streaming, lm, want.ListMeta)
			}
			if len(got) != n || (n > 0 && !equality.Semantic.DeepEqual(got, want.Items)) {
				t.Errorf("%d claims, streaming %t: read %d claims, or not as written", n, streaming, len(got))
			}
		}
	}
}

// TestReadPageCutShort: a page cut short is an error, never a shorter
// page (cut after the list, in the envelope's empty fields that follow
// it, it is the whole page).
func TestReadPageCutShort(t *testing.T) {
	data := encode(t, claimPage(3), true)
	for cut := range len(data) {
		if got, lm, err := read(data[:cut]); err == nil && (len(got) != 3 || lm.ResourceVersion != "42") {
			t.Fatalf("a page cut at byte %d of %d read without an error: %d claims, %+v", cut, len(data), len(got), lm)
		}
	}
}

func TestReadPageRefusesOtherEncodings(t *testing.T) {
	for _, data := range [][]byte{nil, []byte(`{"kind":"PersistentVolumeClaimList"}`), []byte("k8s\x00\x0a\x00"),
		append([]byte("k8s\x00\x12"), 0xff, 0xff, 0xff, 0xff, 0x0f)} {
		if _, _, err := read(data); err == nil {
			t.Errorf("%q read without an error", data)
		}
	}
}

// TestStreamPages reads pages from an API server's answers: protobuf, or
// JSON (decoded whole), with the listing's options in the query.
func TestStreamPages(t *testing.T) {
	want := claimPage(3)
	proto := encode(t, want, true)
	var js bytes.Buffer
	if err := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{}).Encode(want, &js); err != nil {
		t.Fatal(err)
	}
	var asJSON bool
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/persistentvolumeclaims" {
			http.NotFound(w, r)
			return
		}
		query = r.URL.RawQuery
		if asJSON {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(js.Bytes())
			return
		}
		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
		_, _ = w.Write(proto)
	}))
	defer srv.Close()
	rc, err := rest.RESTClientFor(&rest.Config{Host: srv.URL, APIPath: "/api", ContentConfig: rest.ContentConfig{
		GroupVersion: &v1.SchemeGroupVersion, NegotiatedSerializer: scheme.Codecs.WithoutConversion()}})
	if err != nil {
		t.Fatal(err)
	}
	pages := StreamPages[v1.PersistentVolumeClaim](rc, "persistentvolumeclaims")
	for _, asJSON = range []bool{false, true} {
		var got []v1.PersistentVolumeClaim
		lm, err := pages(context.Background(), metav1.ListOptions{Limit: 10, Continue: "c1"}, func(obj runtime.Object) {
			got = append(got, *obj.(*v1.PersistentVolumeClaim))
		})
		if err != nil {
			t.Fatalf("JSON %t: %v", asJSON, err)
		}
		if lm.ResourceVersion != "42" || lm.Continue != "next" || len(got) != 3 || got[2].Name != "c2" || got[2].Spec.VolumeName != "pv-2" {
			t.Errorf("JSON %t: %+v, %d claims", asJSON, lm, len(got))
		}
		if query != "continue=c1&limit=10" {
			t.Errorf("JSON %t: query %q", asJSON, query)
		}
	}
}
