package server

import (
	"context"
	"flag"
	"io"
	"maps"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// --leader-election-labels parses as csi-lib-utils' standardflags does;
// the binder's KCM names register no such flag.
func TestLeaseLabelsFlag(t *testing.T) {
	tests := []struct {
		args    []string
		want    LeaseLabels
		wantErr string
	}{
		{args: nil, want: nil},
		{args: []string{"--leader-election-labels=a:b,c:d"}, want: LeaseLabels{"a": "b", "c": "d"}},
		{args: []string{"--leader-election-labels=a:b", "--leader-election-labels=c:d,a:x"}, want: LeaseLabels{"a": "x", "c": "d"}},
		{args: []string{"--leader-election-labels=a:"}, want: LeaseLabels{"a": ""}},
		{args: []string{"--leader-election-labels=a=b"}, wantErr: "malformed item in list of labels: a=b"},
		{args: []string{"--leader-election-labels=a:b:c"}, wantErr: "malformed"},
		{args: []string{"--leader-election-labels=a:b,"}, wantErr: "malformed"},
		{args: []string{"--leader-election-labels="}, wantErr: "malformed"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			o := DefaultLeaderOptions("", false)
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			o.AddFlags(fs, EPLeaderFlags)
			err := fs.Parse(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(o.Labels, tt.want) {
				t.Errorf("labels %v, want %v", o.Labels, tt.want)
			}
		})
	}
	o := DefaultLeaderOptions("x", true)
	fs := flag.NewFlagSet("binder", flag.ContinueOnError)
	o.AddFlags(fs, KCMLeaderFlags)
	if fs.Lookup("leader-election-labels") != nil || fs.Lookup("leader-elect-labels") != nil {
		t.Error("the binder's flags have a labels flag")
	}
}

// Labels the API server would refuse are a bad setting.
func TestLeaseLabelsCheck(t *testing.T) {
	for _, tt := range []struct {
		labels  LeaseLabels
		wantErr string
	}{
		{LeaseLabels{"app": "csi", "example.com/tier": "storage", "empty": ""}, ""},
		{LeaseLabels{"a b": "c"}, `key "a b"`},
		{LeaseLabels{"a": "b c"}, `value "b c" of a`},
		{LeaseLabels{"": "x"}, `key ""`},
	} {
		o := testLeaderOptions("me")
		o.Labels = tt.labels
		err := o.Validate()
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("%v: %v", tt.labels, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%v: error %v, want %q", tt.labels, err, tt.wantErr)
		}
	}
}

// The leader's Lease carries the labels, beside those it already had.
func TestRunElectedLabelsTheLease(t *testing.T) {
	client := fake.NewClientset()
	o := testLeaderOptions("me")
	o.Labels = LeaseLabels{"a": "b", "c": "d"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	returned := make(chan error, 1)
	go func() {
		returned <- RunElected(ctx, client, o, &Health{}, func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			return nil
		})
	}()
	receive(t, "run to start", started)
	lease, err := client.CoordinationV1().Leases("ns").Get(context.Background(), "lease", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(lease.Labels, map[string]string{"a": "b", "c": "d"}) {
		t.Errorf("lease labels %v, want a=b and c=d", lease.Labels)
	}
	cancel()
	if err := receive(t, "RunElected to return", returned); err != nil {
		t.Fatal(err)
	}
}
