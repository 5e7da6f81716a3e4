"""What Argo CD's repo server reads from the synced tree: the kustomization file it must skip, and the size it
accepts."""

# The kustomization at the root of the synced tree: kept for `kubectl apply -k` and review; Argo CD reads the
# tree as a plain directory and excludes this file (builders/argocd.py).
KUSTOMIZATION_FILE = "kustomization.yaml"

# Argo CD's repo server refuses a directory source whose manifests add up to more than this
# (--max-combined-directory-manifests-size, reposerver.max.combined.directory.manifests.size; default 10M).
REPO_SERVER_MAX_DIRECTORY_BYTES = 10_000_000


def directory_size_warning(synced_files: dict[str, bytes]) -> str | None:
    """A warning when the manifests Argo CD reads exceed its repo server's default limit, else None."""
    total = sum(len(content) for path, content in synced_files.items() if path != KUSTOMIZATION_FILE)
    if total <= REPO_SERVER_MAX_DIRECTORY_BYTES:
        return None
    return (f"the synced manifests add up to {total:,} bytes, over the {REPO_SERVER_MAX_DIRECTORY_BYTES:,} bytes "
            "Argo CD's repo server reads from a directory source by default: raise "
            "reposerver.max.combined.directory.manifests.size in argocd-cmd-params-cm (e.g. to 50M) and restart "
            "the repo server")
