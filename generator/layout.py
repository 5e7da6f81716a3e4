"""Facts about the rendered tree's layout shared by the builders, the tree and the CLI."""

# The kustomization at the root of the synced tree: kept for `kubectl apply -k` and review; Argo CD reads the
# tree as a plain directory and excludes this file (builders/argocd.py).
KUSTOMIZATION_FILE = "kustomization.yaml"
