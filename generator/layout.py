"""What Argo CD's repo server reads from the synced tree: the kustomization file it must skip, and the size it
accepts."""

# The kustomization at the root of the synced tree: kept for `kubectl apply -k` and review; Argo CD reads the
# tree as a plain directory and excludes this file (builders/argocd.py).
KUSTOMIZATION_FILE = "kustomization.yaml"

# Argo CD's repo server refuses a directory source whose manifests add up to more than this
# (--max-combined-directory-manifests-size, reposerver.max.combined.directory.manifests.size; default 10M).
REPO_SERVER_MAX_DIRECTORY_BYTES = 10_000_000


def cluster_folders(synced_files: dict[str, bytes]) -> set[str]:
    """The folders of a synced tree of several clusters: one per cluster, each with its own kustomization.yaml
    (one Application each); none for the tree of one cluster."""
    return {path.partition("/")[0] for path in synced_files
            if path.count("/") == 1 and path.endswith("/" + KUSTOMIZATION_FILE)}


def directory_size_warning(synced_files: dict[str, bytes]) -> str | None:
    """A warning when the manifests one Application reads exceed Argo CD's repo server's default limit, else None.
    A tree of several clusters is one Application per cluster's folder (cluster_folders)."""
    folders = cluster_folders(synced_files)
    sizes: dict[str, int] = {}
    for path, content in synced_files.items():
        if path.rpartition("/")[2] != KUSTOMIZATION_FILE:
            folder = path.partition("/")[0]
            where = folder if folder in folders else ""
            sizes[where] = sizes.get(where, 0) + len(content)
    largest = max(sizes, key=lambda where: sizes[where], default="")
    total = sizes.get(largest, 0)
    if total <= REPO_SERVER_MAX_DIRECTORY_BYTES:
        return None
    which = f"cluster {largest}'s synced manifests add" if largest else "the synced manifests add"
    return (f"{which} up to {total:,} bytes, over the {REPO_SERVER_MAX_DIRECTORY_BYTES:,} bytes "
            "Argo CD's repo server reads from a directory source by default: raise "
            "reposerver.max.combined.directory.manifests.size in argocd-cmd-params-cm (e.g. to 50M) and restart "
            "the repo server")
