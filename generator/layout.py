"""What Argo CD's repo server reads from the synced tree: the kustomization file it must skip, and the size it
accepts."""

# The kustomization at the root of the synced tree: kept for `kubectl apply -k` and review; Argo CD reads the
# tree as a plain directory and excludes this file (builders/argocd.py).
KUSTOMIZATION_FILE = "kustomization.yaml"
# bootstrap/<this>/: Argo CD's settings for a split tree, a kustomize Component for the site's own Argo CD.
SITE_SETTINGS_FOLDER = "argocd-settings"

# Argo CD's repo server refuses a directory source whose manifests add up to more than this
# (--max-combined-directory-manifests-size, reposerver.max.combined.directory.manifests.size; default 10M).
REPO_SERVER_MAX_DIRECTORY_BYTES = 10_000_000


# What this project sizes an Application's manifests to at most: half the repo server's default, which leaves room
# to grow between two renders (Argo CD's security guide sizes the limit at the repo server's memory / (300 x
# Applications)). A larger tree is split: cluster.gitops.groupApplications.
APPLICATION_TARGET_BYTES = 5_000_000


def cluster_folders(synced_files: dict[str, bytes]) -> set[str]:
    """The folders of a synced tree that are each one Application's (a cluster's tree of several, or a folder of a
    tree split into Applications), each with its own kustomization.yaml; none for a tree of one Application."""
    return {path.partition("/")[0] for path in synced_files
            if path.count("/") == 1 and path.endswith("/" + KUSTOMIZATION_FILE)}


def directory_size_warning(synced_files: dict[str, bytes]) -> str | None:
    """A warning when the manifests one Application reads exceed the size this project targets (and, worse, Argo
    CD's repo server's default limit), else None. Each folder of cluster_folders is one Application."""
    folders = cluster_folders(synced_files)
    sizes: dict[str, int] = {}
    for path, content in synced_files.items():
        if path.rpartition("/")[2] != KUSTOMIZATION_FILE:
            folder = path.partition("/")[0]
            where = folder if folder in folders else ""
            sizes[where] = sizes.get(where, 0) + len(content)
    largest = max(sizes, key=lambda where: sizes[where], default="")
    total = sizes.get(largest, 0)
    if total <= APPLICATION_TARGET_BYTES:
        return None
    which = f"the synced manifests of {largest}/ (one Application) add" if largest else "the synced manifests add"
    split = ("put the groups' objects in Applications of their own (cluster.gitops.groupApplications, "
             "docs/scale.md)")
    if total <= REPO_SERVER_MAX_DIRECTORY_BYTES:
        return (f"{which} up to {total:,} bytes, over the {APPLICATION_TARGET_BYTES:,} bytes this project sizes an "
                f"Application to, half of what Argo CD's repo server reads from a directory by default: {split}")
    return (f"{which} up to {total:,} bytes, over the {REPO_SERVER_MAX_DIRECTORY_BYTES:,} bytes "
            f"Argo CD's repo server reads from a directory source by default: {split}, or raise "
            "reposerver.max.combined.directory.manifests.size in argocd-cmd-params-cm (e.g. to 50M) and restart "
            "the repo server")
