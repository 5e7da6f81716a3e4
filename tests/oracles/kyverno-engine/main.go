// Command engine evaluates Kyverno ValidatingPolicies with Kyverno's own CEL engine (the packages the kyverno CLI
// and admission controller use) on admission requests whose oldObject differs from the object, which
// `kyverno test` cannot express: for an UPDATE it sends the object as its own oldObject.
//
//	engine POLICY_FILE... < requests.json > responses.json
//
// requests.json: [{"id", "operation", "subResource", "username", "object", "oldObject", "namespaces", "resources"}];
// namespaces are the names of the existing namespaces (each gets the kubernetes.io/metadata.name label, as the API
// server sets it); resources are the objects a policy's resource.Get finds (a namespace's job-limits ConfigMap),
// those of every request alike.
// responses.json: [{"id", "policy", "status", "message"}], one per policy that matched the request.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno/policy"
	celengine "github.com/kyverno/kyverno/pkg/cel/engine"
	"github.com/kyverno/kyverno/pkg/cel/libs"
	"github.com/kyverno/kyverno/pkg/cel/matching"
	vpolcompiler "github.com/kyverno/kyverno/pkg/cel/policies/vpol/compiler"
	vpolengine "github.com/kyverno/kyverno/pkg/cel/policies/vpol/engine"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

type request struct {
	ID          string                   `json:"id"`
	Operation   string                   `json:"operation"`
	SubResource string                   `json:"subResource"`
	Username    string                   `json:"username"`
	Object      map[string]interface{}   `json:"object"`
	OldObject   map[string]interface{}   `json:"oldObject"`
	Namespaces  []string                 `json:"namespaces"`
	Resources   []map[string]interface{} `json:"resources"`
}

type response struct {
	ID      string `json:"id"`
	Policy  string `json:"policy"`
	Status  string `json:"status"`
	Message string `json:"message"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run() error {
	loaded, err := policy.Load(nil, "", os.Args[1:]...)
	if err != nil {
		return err
	}
	if len(loaded.ValidatingPolicies) == 0 {
		return fmt.Errorf("no ValidatingPolicy in %v", os.Args[1:])
	}
	var requests []request
	if err := json.NewDecoder(os.Stdin).Decode(&requests); err != nil {
		return err
	}
	// The policies' resource library reads the global library context the compiler captures (libs.GetLibsCtx),
	// not the request's: every request's resources go into it before the policies are compiled.
	cluster := libs.NewFakeContextProvider()
	for _, req := range requests {
		for _, found := range req.Resources {
			resource := &unstructured.Unstructured{Object: found}
			kind := resource.GroupVersionKind()
			plural := schema.GroupVersionResource{Group: kind.Group, Version: kind.Version,
				Resource: strings.ToLower(kind.Kind) + "s"}
			if err := cluster.AddResource(plural, resource); err != nil {
				return fmt.Errorf("%s: %w", req.ID, err)
			}
		}
	}
	libs.LibraryContext = cluster
	provider, err := vpolengine.NewProvider(vpolcompiler.NewCompiler(), loaded.ValidatingPolicies, nil)
	if err != nil {
		return err
	}
	responses := []response{}
	for _, req := range requests {
		namespaces := map[string]*corev1.Namespace{}
		for _, name := range req.Namespaces {
			namespaces[name] = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
				Name: name, Labels: map[string]string{"kubernetes.io/metadata.name": name}}}
		}
		resolve := func(name string) *corev1.Namespace { return namespaces[name] }
		engine := vpolengine.NewEngine(provider, resolve, matching.NewMatcher())
		object := &unstructured.Unstructured{Object: req.Object}
		var oldObject runtime.Object
		if req.OldObject != nil {
			oldObject = &unstructured.Unstructured{Object: req.OldObject}
		}
		gvk := object.GroupVersionKind()
		gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: strings.ToLower(gvk.Kind) + "s"}
		engineRequest := celengine.Request(cluster, gvk, gvr, req.SubResource, object.GetName(), object.GetNamespace(),
			admissionv1.Operation(req.Operation), authenticationv1.UserInfo{Username: req.Username}, object, oldObject, false, nil)
		result, err := engine.Handle(context.TODO(), engineRequest, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", req.ID, err)
		}
		for _, p := range result.Policies {
			for _, rule := range p.Rules {
				responses = append(responses, response{ID: req.ID, Policy: p.Policy.GetName(),
					Status: string(rule.Status()), Message: rule.Message()})
			}
		}
	}
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", " ")
	return out.Encode(responses)
}
