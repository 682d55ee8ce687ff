package main

import "testing"

func TestSocketPath(t *testing.T) {
	for in, want := range map[string]string{
		"unix:///run/csi/csi.sock": "/run/csi/csi.sock",
		"unix:/run/csi.sock":       "/run/csi.sock",
		"/run/csi.sock":            "/run/csi.sock",
		"":                         "",
		"tcp://1.2.3.4:5":          "",
		"unix://":                  "",
	} {
		got, err := socketPath(in)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("socketPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestQuantity(t *testing.T) {
	for in, want := range map[string]int64{"10Gi": 10 << 30, "1G": 1e9, "512Mi": 512 << 20, "0": 0, "-1Gi": -1, "abc": -1, "1.5": -1, "100Ti": 100 << 40, "9Ei": -1} {
		got, err := quantity("--capacity", in)
		if (want < 0) != (err != nil) || (err == nil && got != want) {
			t.Errorf("quantity(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}
