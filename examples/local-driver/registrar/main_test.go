package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

type identity struct {
	csi.UnimplementedIdentityServer
}

func (identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: "local.csi.tether.dev", VendorVersion: "test"}, nil
}

// kubelet's side: it finds <driver>-reg.sock, asks GetInfo, and reports
// the outcome; a refusal ends the registrar with kubelet's error.
func TestRegistration(t *testing.T) {
	dir, err := os.MkdirTemp("", "reg") // unix socket paths must stay short
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	driverSock := filepath.Join(dir, "csi.sock")
	lis, err := net.Listen("unix", driverSock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, identity{})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, options{csiAddress: driverSock, kubeletPath: "/var/lib/kubelet/plugins/x/csi.sock", regPath: dir, timeout: time.Second})
	}()

	regSock := filepath.Join(dir, "local.csi.tether.dev-reg.sock")
	conn, err := grpc.NewClient("unix://"+regSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := registerapi.NewRegistrationClient(conn)
	var info *registerapi.PluginInfo
	for info == nil { // until the registrar listens (it first asks the driver)
		if info, err = client.GetInfo(ctx, &registerapi.InfoRequest{}, grpc.WaitForReady(true)); err != nil && ctx.Err() != nil {
			t.Fatalf("GetInfo: %v", err)
		}
	}
	if info.Type != registerapi.CSIPlugin || info.Name != "local.csi.tether.dev" || info.Endpoint != "/var/lib/kubelet/plugins/x/csi.sock" {
		t.Errorf("GetInfo = %+v", info)
	}
	if _, err := client.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{Error: "no such version"}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || err.Error() != "no such version" {
			t.Errorf("run = %v, want kubelet's refusal", err)
		}
	case <-ctx.Done():
		t.Fatal("the registrar did not stop after kubelet refused it")
	}
	if _, err := os.Stat(regSock); !os.IsNotExist(err) {
		t.Errorf("registration socket left behind: %v", err)
	}
}

// The DaemonSet's next pod starts its registrar while the old one is on
// its way out (kubelet back after its node was lost): the old registrar's
// exit must leave the new socket in place, and /healthz tells which
// registrar the socket is.
func TestReplacedSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "reg")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "d-reg.sock")
	old, err := listen(path)
	if err != nil {
		t.Fatal(err)
	}
	healthz := func(s *regSocket) int {
		rec := httptest.NewRecorder()
		s.healthz().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		return rec.Code
	}
	if code := healthz(old); code != http.StatusOK {
		t.Errorf("healthz of the only registrar = %d", code)
	}
	cur, err := listen(path) // the new pod's registrar
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	if code := healthz(old); code != http.StatusInternalServerError {
		t.Errorf("healthz of the replaced registrar = %d, want 500", code)
	}
	old.Close()
	old.Remove()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the old registrar took the new socket with it: %v", err)
	}
	if code := healthz(cur); code != http.StatusOK {
		t.Errorf("healthz of the new registrar = %d", code)
	}
	cur.Close()
	cur.Remove()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the socket is left behind: %v", err)
	}
	if code := healthz(cur); code != http.StatusInternalServerError {
		t.Errorf("healthz with the socket gone = %d, want 500", code)
	}
}
