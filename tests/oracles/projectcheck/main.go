// Command projectcheck judges Argo CD Applications and the objects their sources make Argo CD apply against their
// AppProjects with Argo CD's own code: the AppProject methods of the pinned
// github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1, called the way Argo CD calls them.
//
//	projectcheck < input.json      (exit 0: clean; 1: violations, one line each on stdout; 2: bad input)
//	projectcheck expand < appset.json   (the Applications an ApplicationSet generates, as a JSON list)
//	projectcheck health < health.json   (each object's health by the health checks of an argocd-cm, as a JSON list)
//
// input.json:
//
//	{"projects": [<AppProject>...],
//	 "applications": [{"application": <Application>,
//	                   "objects": [{"group", "kind", "name", "namespace", "namespaced": bool}...]}...]}
//
// What Argo CD v3.6 does, and what this program does in its place:
//   - controller/appcontroller.go: an Application whose project does not exist gets "Application referencing
//     project P which does not exist"; nothing else is checked.
//   - util/argo/argo.go ValidatePermissions: every source (the dry and sync sources of a source hydrator, each of
//     spec.sources, or spec.source) must be proj.IsSourcePermitted, else "application repo R is not permitted in
//     project 'P'"; the destination cluster (util/db GetCluster: for https://kubernetes.default.svc the local
//     cluster named in-cluster) with spec.destination.namespace must be proj.IsDestinationPermitted, else
//     "application destination server 'S' and namespace 'N' do not match any of the allowed destinations in
//     project 'P'". Destinations by cluster name are resolved from Argo CD's cluster secrets, which this program
//     does not have: such an Application is reported.
//   - controller/state.go NormalizeTargetObjects: a namespaced object without a namespace gets the Application's
//     destination namespace; a cluster-scoped object's namespace is dropped.
//   - controller/sync.go validateSyncPermissions (also applied to PreDelete/PostDelete hooks, controller/hook.go):
//     proj.IsGroupKindNamePermitted(gk, name, namespaced), else "resource G:K is not permitted in project P";
//     for a namespaced object proj.IsDestinationPermitted(cluster, namespace), else "namespace N is not permitted
//     in project 'P'".
//
// Project-scoped clusters (spec.permitOnlyProjectScopedClusters) come from cluster secrets; none is given here,
// so such a project permits no destination, as Argo CD would decide without project-scoped cluster secrets.
//
// `expand` generates an ApplicationSet's Applications with the ApplicationSet controller's own code:
// applicationset/controllers/template.GenerateApplications with the list generator and the template renderer the
// controller registers (applicationset/generators, applicationset/utils), without a Kubernetes client: the list
// generator needs none.
//
// `health` reads {"configMap": <argocd-cm>, "objects": [<object>...]} and prints [{"status", "message"}...], one per
// object: argocd-cm read by Argo CD's settings manager (util/settings GetResourceOverrides, from a fake clientset
// holding only that ConfigMap), each object's health override run by Argo CD's Lua VM
// (util/lua ResourceHealthOverrides.GetResourceHealth: the libraries the controller opens, no more). An object
// without an override in that ConfigMap gets {"status": ""}: this program judges the ConfigMap's checks only.
//
// Each line is prefixed by the Application's name and, for an object, "Kind namespace/name" (or "Kind name" for a
// cluster-scoped object), so a test can name what is wrong.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"

	"k8s.io/apimachinery/pkg/runtime/schema"

	log "github.com/sirupsen/logrus"

	"github.com/argoproj/argo-cd/v3/applicationset/controllers/template"
	"github.com/argoproj/argo-cd/v3/applicationset/generators"
	"github.com/argoproj/argo-cd/v3/applicationset/utils"
	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	argolua "github.com/argoproj/argo-cd/v3/util/lua"
	"github.com/argoproj/argo-cd/v3/util/settings"
)

type object struct {
	Group      string `json:"group"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace"`
	Namespaced *bool  `json:"namespaced"`
}

type entry struct {
	Application *v1alpha1.Application `json:"application"`
	Objects     []object              `json:"objects"`
}

type input struct {
	Projects     []v1alpha1.AppProject `json:"projects"`
	Applications []entry               `json:"applications"`
}

// noProjectClusters: the project-scoped clusters Argo CD would read from cluster secrets; there are none.
func noProjectClusters(string) ([]*v1alpha1.Cluster, error) { return nil, nil }

// destinationCluster is what util/db GetCluster returns for a server URL when no cluster secret overrides it:
// the local cluster (named in-cluster) for https://kubernetes.default.svc, else a cluster known by its server.
func destinationCluster(server string) *v1alpha1.Cluster {
	if server == v1alpha1.KubernetesInternalAPIServerAddr {
		return &v1alpha1.Cluster{Name: v1alpha1.KubernetesInClusterName, Server: server}
	}
	return &v1alpha1.Cluster{Server: server}
}

// sources: what ValidatePermissions checks with IsSourcePermitted, with the wording of each message.
func sources(spec *v1alpha1.ApplicationSpec) (out []v1alpha1.ApplicationSource, words []string) {
	switch {
	case spec.SourceHydrator != nil:
		dry, sync := spec.SourceHydrator.GetDrySource(), spec.SourceHydrator.GetSyncSource()
		out, words = append(out, dry), append(words, "application repo")
		if sync.RepoURL != spec.SourceHydrator.DrySource.RepoURL {
			out, words = append(out, sync), append(words, "sync source repo")
		}
	case spec.HasMultipleSources():
		for _, s := range spec.Sources {
			out, words = append(out, s), append(words, "application repo")
		}
	default:
		out, words = append(out, spec.GetSource()), append(words, "application repo")
	}
	return out, words
}

func check(projects map[string]*v1alpha1.AppProject, e entry) ([]string, error) {
	app := e.Application
	var lines []string
	report := func(format string, args ...any) { lines = append(lines, app.Name+": "+fmt.Sprintf(format, args...)) }

	proj, ok := projects[app.Spec.Project]
	if !ok {
		report("Application referencing project %s which does not exist", app.Spec.Project)
		return lines, nil
	}
	srcs, words := sources(&app.Spec)
	for i, src := range srcs {
		if !proj.IsSourcePermitted(src) {
			report("%s %s is not permitted in project '%s'", words[i], src.RepoURL, proj.Name)
		}
	}

	dest := app.Spec.Destination
	if dest.Server == "" || dest.Name != "" {
		report("destination server '%s' name '%s': only a destination by server is checked here (a cluster "+
			"name is resolved from Argo CD's cluster secrets); its objects are not checked", dest.Server, dest.Name)
		return lines, nil
	}
	cluster := destinationCluster(dest.Server)
	permitted, err := proj.IsDestinationPermitted(cluster, dest.Namespace, noProjectClusters)
	if err != nil {
		return nil, err
	}
	if !permitted {
		report("application destination server '%s' and namespace '%s' do not match any of the allowed "+
			"destinations in project '%s'", cluster.Server, dest.Namespace, proj.Name)
	}

	for _, o := range e.Objects {
		if o.Namespaced == nil {
			return nil, fmt.Errorf("%s: object %s %s/%s: namespaced not given", app.Name, o.Kind, o.Namespace, o.Name)
		}
		namespaced, ns := *o.Namespaced, o.Namespace
		if !namespaced {
			ns = ""
		} else if ns == "" {
			ns = dest.Namespace
		}
		label := o.Kind + " " + o.Name
		if namespaced {
			label = o.Kind + " " + ns + "/" + o.Name
		}
		gk := schema.GroupKind{Group: o.Group, Kind: o.Kind}
		if !proj.IsGroupKindNamePermitted(gk, o.Name, namespaced) {
			report("%s: resource %s:%s is not permitted in project %s", label, o.Group, o.Kind, proj.Name)
			continue // validateSyncPermissions returns at the first refusal
		}
		if namespaced {
			ok, err := proj.IsDestinationPermitted(cluster, ns, noProjectClusters)
			if err != nil {
				return nil, err
			}
			if !ok {
				report("%s: namespace %v is not permitted in project '%s'", label, ns, proj.Name)
			}
		}
	}
	return lines, nil
}

// expand prints the Applications the ApplicationSet on stdin generates; a generation error exits 1.
func expand() {
	var appSet v1alpha1.ApplicationSet
	dec := json.NewDecoder(os.Stdin)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&appSet); err != nil {
		fmt.Fprintf(os.Stderr, "projectcheck: reading the ApplicationSet: %v\n", err)
		os.Exit(2)
	}
	// Only the list generator: the others read clusters, repositories or SCM providers this program has not.
	listOnly := map[string]generators.Generator{"List": generators.NewListGenerator()}
	apps, reason, err := template.GenerateApplications(log.NewEntry(log.StandardLogger()), appSet, listOnly,
		&utils.Render{}, nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "projectcheck: %s: %v\n", reason, err)
		os.Exit(1)
	}
	out, err := json.Marshal(apps)
	if err != nil {
		fmt.Fprintf(os.Stderr, "projectcheck: %v\n", err)
		os.Exit(2)
	}
	fmt.Println(string(out))
}

type healthInput struct {
	ConfigMap corev1.ConfigMap            `json:"configMap"`
	Objects   []unstructured.Unstructured `json:"objects"`
}

type healthResult struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// health prints each object's health by the ConfigMap's health checks; a failing check exits 1.
func health() {
	var in healthInput
	dec := json.NewDecoder(os.Stdin)
	if err := dec.Decode(&in); err != nil {
		fmt.Fprintf(os.Stderr, "projectcheck: reading the health input: %v\n", err)
		os.Exit(2)
	}
	const namespace = "argocd"
	in.ConfigMap.Name, in.ConfigMap.Namespace = "argocd-cm", namespace
	in.ConfigMap.Labels = map[string]string{"app.kubernetes.io/part-of": "argocd"}
	client := fake.NewClientset(&in.ConfigMap)
	overrides, err := settings.NewSettingsManager(context.Background(), client, namespace).GetResourceOverrides()
	if err != nil {
		fmt.Fprintf(os.Stderr, "projectcheck: the ConfigMap's resource overrides: %v\n", err)
		os.Exit(1)
	}
	out := []healthResult{}
	for i := range in.Objects {
		status, err := argolua.ResourceHealthOverrides(overrides).GetResourceHealth(&in.Objects[i])
		if err != nil {
			fmt.Fprintf(os.Stderr, "projectcheck: health of %s %s: %v\n", in.Objects[i].GetKind(),
				in.Objects[i].GetName(), err)
			os.Exit(1)
		}
		if status == nil {
			out = append(out, healthResult{})
			continue
		}
		out = append(out, healthResult{Status: string(status.Status), Message: status.Message})
	}
	data, _ := json.Marshal(out)
	fmt.Println(string(data))
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "expand" {
		log.SetOutput(os.Stderr)
		expand()
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "health" {
		log.SetOutput(os.Stderr)
		health()
		return
	}
	var in input
	dec := json.NewDecoder(os.Stdin)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		fmt.Fprintf(os.Stderr, "projectcheck: reading input: %v\n", err)
		os.Exit(2)
	}
	projects := map[string]*v1alpha1.AppProject{}
	for i := range in.Projects {
		projects[in.Projects[i].Name] = &in.Projects[i]
	}
	var all []string
	for _, e := range in.Applications {
		if e.Application == nil {
			fmt.Fprintln(os.Stderr, "projectcheck: an entry without an application")
			os.Exit(2)
		}
		lines, err := check(projects, e)
		if err != nil {
			fmt.Fprintf(os.Stderr, "projectcheck: %v\n", err)
			os.Exit(2)
		}
		all = append(all, lines...)
	}
	sort.Strings(all)
	for _, l := range all {
		fmt.Println(l)
	}
	if len(all) > 0 {
		os.Exit(1)
	}
}
