// Command registry serves a real OCI registry (go-containerregistry's pkg/registry) on 127.0.0.1 and pushes
// the images the image-architecture guardrail is tested against, with go-containerregistry's own client:
//
//	registry -user U -password P
//
// It prints `DIGEST tag sha256:...` for each image and `ADDR host:port` once every image is pushed, then serves until stdin is closed (the test closes
// it, or dies), so it never outlives the test. Repositories under private/ need the basic-auth credentials.
//
// Images (REPO = vision/train unless said):
//
//	multi            index: linux/amd64, linux/arm64, and a buildx attestation manifest (unknown/unknown)
//	arm64-attested   index: linux/arm64 and its attestation manifest (what `docker buildx build --platform
//	                 linux/arm64 --push` makes by default)
//	amd64-attested   index: linux/amd64 and its attestation manifest
//	amd64-index      index: linux/amd64 only
//	arm64-s390x      index: linux/arm64, linux/s390x (no linux/amd64, no attestation)
//	arm64-single     a single-platform linux/arm64 manifest
//	amd64-single     a single-platform linux/amd64 manifest
//	missing          never pushed
//	private/train:arm64-attested   like arm64-attested, behind basic auth
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func main() {
	user := flag.String("user", "researcher", "user for private/ repositories")
	password := flag.String("password", "secret", "password for private/ repositories")
	flag.Parse()
	if err := run(*user, *password); err != nil {
		log.Fatal(err)
	}
}

// privateAuth asks for basic-auth credentials on private/ repositories, as a private registry does.
func privateAuth(next http.Handler, user, password string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v2/private/") {
			u, p, ok := r.BasicAuth()
			if !ok || u != user || p != password {
				w.Header().Set("WWW-Authenticate", `Basic realm="gpugen-test"`)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func image(goos, arch string) (v1.Image, error) {
	img, err := random.Image(256, 1)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = goos, arch
	return mutate.ConfigFile(img, cfg)
}

type child struct{ os, arch string }

// index builds an OCI image index of one image per platform; attested adds a buildx attestation manifest
// per image (platform unknown/unknown, annotated with the image it describes).
func index(children []child, attested bool) (v1.ImageIndex, error) {
	var idx v1.ImageIndex = mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, c := range children {
		img, err := image(c.os, c.arch)
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			MediaType: types.OCIManifestSchema1, Platform: &v1.Platform{OS: c.os, Architecture: c.arch}}})
		if !attested {
			continue
		}
		digest, err := img.Digest()
		if err != nil {
			return nil, err
		}
		attestation, err := image("unknown", "unknown")
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: attestation, Descriptor: v1.Descriptor{
			MediaType: types.OCIManifestSchema1,
			Platform:  &v1.Platform{OS: "unknown", Architecture: "unknown"},
			Annotations: map[string]string{
				"vnd.docker.reference.digest": digest.String(),
				"vnd.docker.reference.type":   "attestation-manifest",
			}}})
	}
	return idx, nil
}

func run(user, password string) error {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := listener.Addr().String()
	server := &http.Server{Handler: privateAuth(registry.New(registry.Logger(log.New(io.Discard, "", 0))), user, password)}
	go func() { _ = server.Serve(listener) }()

	auth := remote.WithAuth(&authn.Basic{Username: user, Password: password})
	pushIndex := func(repoTag string, children []child, attested bool) error {
		ref, err := name.ParseReference(addr + "/" + repoTag)
		if err != nil {
			return err
		}
		idx, err := index(children, attested)
		if err != nil {
			return err
		}
		return remote.WriteIndex(ref, idx, auth)
	}
	pushImage := func(repoTag, goos, arch string) error {
		ref, err := name.ParseReference(addr + "/" + repoTag)
		if err != nil {
			return err
		}
		img, err := image(goos, arch)
		if err != nil {
			return err
		}
		digest, err := img.Digest()
		if err != nil {
			return err
		}
		fmt.Printf("DIGEST %s %s\n", repoTag, digest)
		return remote.Write(ref, img, auth)
	}
	amd64, arm64, s390x := child{"linux", "amd64"}, child{"linux", "arm64"}, child{"linux", "s390x"}
	steps := []func() error{
		func() error { return pushIndex("vision/train:multi", []child{amd64, arm64}, true) },
		func() error { return pushIndex("vision/train:arm64-attested", []child{arm64}, true) },
		func() error { return pushIndex("vision/train:amd64-attested", []child{amd64}, true) },
		func() error { return pushIndex("vision/train:amd64-index", []child{amd64}, false) },
		func() error { return pushIndex("vision/train:arm64-s390x", []child{arm64, s390x}, false) },
		func() error { return pushImage("vision/train:arm64-single", "linux", "arm64") },
		func() error { return pushImage("vision/train:amd64-single", "linux", "amd64") },
		func() error { return pushIndex("private/train:arm64-attested", []child{arm64}, true) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	fmt.Printf("ADDR %s\n", addr)
	// Serve until stdin closes: the test holds the pipe, so the registry ends with it.
	_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	return server.Close()
}
