// Command registry serves a real OCI registry (go-containerregistry's pkg/registry) on 127.0.0.1 and pushes
// the images the image-architecture guardrail is tested against, with go-containerregistry's own client:
//
//	registry -user U -password P
//
// It prints `DIGEST repo:tag sha256:...` for each image (and each child of an index, as repo:tag-arch), `HUB
// host:port` and then `ADDR host:port` once every image is pushed, then serves until stdin is closed (the test closes
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
//	private/train:arm64-attested   like arm64-attested, behind basic auth (DIGEST arm64-child: its arm64 image)
//	private/train:arm64-single     like arm64-single, behind basic auth
//	hub/train:arm64-attested, hub/train:amd64-attested   like those above
//
// A second address (`HUB host:port`) serves the same repositories as Docker Hub, GHCR, quay.io and nvcr.io serve
// public images: to anonymous readers, each request with a token from its token service (GET /token?service=
// gpugen-test&scope=repository:NAME:pull), and a 401 with the challenge naming that service otherwise (on /v2/
// too, where clients look for the challenge).
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

// anonymousToken is what the token service gives anyone for a scope (repository:NAME:pull).
func anonymousToken(scope string) string { return "anonymous:" + scope }

// tokenAuth serves the token service and asks for its token on every registry request, as a public registry with
// token authentication does.
func tokenAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			w.Header().Set("Content-Type", "application/json")
			token := anonymousToken(r.URL.Query().Get("scope"))
			_, _ = fmt.Fprintf(w, `{"token":%q,"access_token":%q,"expires_in":300}`, token, token)
			return
		}
		scope := ""
		if rest, ok := strings.CutPrefix(r.URL.Path, "/v2/"); ok && rest != "" {
			// /v2/NAME/manifests/REF or /v2/NAME/blobs/DIGEST; NAME may hold slashes.
			for _, kind := range []string{"/manifests/", "/blobs/"} {
				if i := strings.LastIndex(rest, kind); i > 0 {
					scope = "repository:" + rest[:i] + ":pull"
				}
			}
		}
		if scope == "" || r.Header.Get("Authorization") != "Bearer "+anonymousToken(scope) {
			challenge := fmt.Sprintf(`Bearer realm="http://%s/token",service="gpugen-test"`, r.Host)
			if scope != "" {
				challenge += fmt.Sprintf(`,scope=%q`, scope)
			}
			w.Header().Set("WWW-Authenticate", challenge)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
			return
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
	storage := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	server := &http.Server{Handler: privateAuth(storage, user, password)}
	go func() { _ = server.Serve(listener) }()
	hubListener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hub := &http.Server{Handler: tokenAuth(storage)}
	go func() { _ = hub.Serve(hubListener) }()

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
		manifest, err := idx.IndexManifest()
		if err != nil {
			return err
		}
		// The digest of each child image, for references pinned to one platform: DIGEST repo:tag-os-arch.
		for _, m := range manifest.Manifests {
			if m.Platform != nil && m.Platform.OS != "unknown" {
				fmt.Printf("DIGEST %s-%s %s\n", repoTag, m.Platform.Architecture, m.Digest)
			}
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
		func() error { return pushImage("private/train:arm64-single", "linux", "arm64") },
		func() error { return pushIndex("hub/train:arm64-attested", []child{arm64}, true) },
		func() error { return pushIndex("hub/train:amd64-attested", []child{amd64}, true) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	fmt.Printf("HUB %s\n", hubListener.Addr())
	fmt.Printf("ADDR %s\n", addr)
	// Serve until stdin closes: the test holds the pipe, so the registry ends with it.
	_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	_ = hub.Close()
	return server.Close()
}
