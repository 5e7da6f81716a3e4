// Argo CD's application controller, repo-server and ApplicationSet controller in one binary, for the
// simulated clusters.
//
// Upstream's cmd/main.go links every component (API server, Dex, notifications, the CLI, ...);
// this main links only the three a sync of several clusters needs, which keeps the cold build inside CI's budget.
// Like upstream, argv[0] or ARGOCD_BINARY_NAME picks the component.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	appcontroller "github.com/argoproj/argo-cd/v3/cmd/argocd-application-controller/commands"
	appsetcontroller "github.com/argoproj/argo-cd/v3/cmd/argocd-applicationset-controller/commands"
	reposerver "github.com/argoproj/argo-cd/v3/cmd/argocd-repo-server/commands"
	"github.com/argoproj/argo-cd/v3/common"
	"github.com/argoproj/argo-cd/v3/util/log"
)

func init() {
	klog.SetLogger(log.NewLogrusLogger(log.NewWithCurrentConfig()))
}

func main() {
	// Upstream's main calls grpc.DisableSRVLookups() here, which panics unless gRPC's grpclb balancer is linked
	// (its init turns SRV lookups on). These three commands do not link it, so SRV lookups are already off.
	name := filepath.Base(os.Args[0])
	if v := os.Getenv("ARGOCD_BINARY_NAME"); v != "" {
		name = v
	}
	var command *cobra.Command
	switch name {
	case common.CommandApplicationController:
		command = appcontroller.NewCommand()
	case common.CommandRepoServer:
		command = reposerver.NewCommand()
	case common.CommandApplicationSetController:
		command = appsetcontroller.NewCommand()
	default:
		fmt.Fprintf(os.Stderr, "argocd: set ARGOCD_BINARY_NAME to %s, %s or %s (got %q)\n",
			common.CommandApplicationController, common.CommandRepoServer, common.CommandApplicationSetController, name)
		os.Exit(2)
	}
	if err := command.Execute(); err != nil {
		os.Exit(1)
	}
}
