// Command kind-image builds tether's kind node image (test/kindnode) and
// either loads it into docker (-load) or writes its docker-archive (-o).
// It prints the image's reference and ID: the same commit gives the same
// ID.
//
//	go run ./hack/kind-image [-o FILE | -load] [-cache DIR]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/tether-csi/tether/test/kindnode"
)

func main() {
	out := flag.String("o", "", "write the image's docker-archive to this file")
	load := flag.Bool("load", false, "load the image into docker (docker load; DOCKER_HOST is honoured)")
	cache := flag.String("cache", "", "cache folder (default .cache/kind)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	root, err := os.Getwd()
	if err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	o := kindnode.Options{Root: root, Cache: *cache, Log: func(f string, a ...any) {
		fmt.Fprintf(os.Stderr, "kind-image: %s: "+f+"\n", append([]any{time.Since(start).Round(time.Second)}, a...)...)
	}}
	var w io.Writer = io.Discard
	var done func() error = func() error { return nil }
	switch {
	case *load:
		cmd := exec.CommandContext(ctx, "docker", "load")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		pipe, err := cmd.StdinPipe()
		if err != nil {
			log.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			log.Fatalf("kind-image: docker load: %v", err)
		}
		w, done = pipe, func() error { pipe.Close(); return cmd.Wait() }
	case *out != "":
		if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
			log.Fatal(err)
		}
		f, err := os.Create(*out)
		if err != nil {
			log.Fatal(err)
		}
		w, done = f, f.Close
	}
	img, err := kindnode.Build(ctx, o, w)
	if err != nil {
		log.Fatalf("kind-image: %v", err)
	}
	if err := done(); err != nil {
		log.Fatalf("kind-image: %v", err)
	}
	fmt.Printf("%s %s (%s)\n", img.Ref, img.ID, time.Since(start).Round(time.Second))
}
