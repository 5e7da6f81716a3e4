"""Table-driven corpus of broken inventories (in the spirit of Kueue's API validation tests).

Each case edits the real gpu_classes.yaml, runs the CLI against an already rendered output directory, and
expects: exit code 2, a `PATH:LINE:COL: field: reason` line at the right line naming the right field, and
the output directory byte-for-byte and mtime-for-mtime untouched.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.support import INVENTORY, snapshot

from generator.cli import main

VALID = INVENTORY.read_text(encoding="utf-8")


@dataclass
class Case:
    name: str
    edits: list[tuple[str, str]]  # (old, new) replaced once each, in order; old="" replaces the whole file
    at: str  # the error's line is the line of this text in the edited file...
    field: str  # ...and names this field (substring of the field path)
    reason: str  # regex searched in the reason
    occurrence: int = 1  # ...at its n-th occurrence
    extra: dict = field(default_factory=dict)


GH200_IMAGE = "image: ghcr.io/urcf/pytorch:2.9.1-cuda12.9"
GH200_WALLTIME = "    walltime:\n      default: 24h\n      maximum: 7d\n"
CLUSTERS = ("\nclasses:\n", "\nclusters:\n  hub: {role: manager, server: https://hub.example.org:6443}\n"
                            "  flame: {role: worker, server: https://flame.example.org:6443}\n\nclasses:\n")
ON_FLAME = (GH200_WALLTIME, GH200_WALLTIME + "    cluster: flame\n")


def with_cluster(line: str) -> tuple[str, str]:
    """CLUSTERS' edit with one more cluster declared."""
    return CLUSTERS[0], CLUSTERS[1].replace("\n\nclasses:\n", f"\n  {line}\n\nclasses:\n")


def with_accelerator(text: str) -> tuple[str, str]:
    """The edit that gives FLAME's class the accelerator `text` (YAML)."""
    return f"    {GH200_IMAGE}\n", f"    {GH200_IMAGE}\n    accelerator: {text}\n"


VISION_GPUS = "    allocations:\n      gh200:\n        gpus: 1\n        cpu: 36\n        memory: 240G\n  nlp-lab:"

CASES = [
    Case("component-off-without-existing-installation",
         [("    kueue: {install: true, namespace: kueue-system",
           "    kueue: {install: false, namespace: kueue-system")],
         "kueue: {install: false", "cluster.components.kueue.install", r"no existing installation is declared"),
    Case("component-installed-and-existing",
         [("    jobset: {install: true, namespace", "    jobset: {install: true, existing: true, namespace")],
         "jobset: {install: true, existing", "cluster.components.jobset.existing", r"second one"),
    Case("yaml-syntax-error", [(GH200_IMAGE, "image: ghcr.io/urcf/pytorch: 2.9.1")], "image:", "(document)",
         r"YAML: mapping values are not allowed"),
    Case("tab-indentation", [("    arch: arm64", "\tarch: arm64")], "\tarch", "(document)",
         r"YAML: found a tab character"),
    Case("duplicate-key", [("    arch: arm64\n", "    arch: arm64\n    arch: amd64\n")], "arch: amd64", "(document)",
         r"duplicate key 'arch' \(first at line \d+"),
    Case("empty-file", [("", "")], "", "(document)", r"empty"),
    Case("comments-only", [("", "# nothing here\n")], "", "(document)", r"empty"),
    Case("list-instead-of-mapping", [("", "- cluster\n- classes\n")], "", "(document)", r"expected a mapping.*list"),
    Case("unknown-top-level-field", [("\ngroups:\n", "\ngrups:\n")], "grups:", "grups", r"unknown field"),
    Case("unknown-class-field", [("    numNodes: 1", "    numNode: 1")], "numNode:", "classes.gh200.numNode",
         r"unknown field"),
    Case("unknown-allocation-field", [("        memory: 240G\n", "        memory: 240G\n        borrow: 1\n")],
         "borrow:", "groups.vision-lab.allocations.gh200.borrow", r"unknown field"),
    Case("missing-required-field", [(f"    {GH200_IMAGE}\n", "")], "  gh200:", "classes.gh200.image",
         r"Field required"),
    Case("wrong-type-int", [("    nodes: 2", "    nodes: two")], "nodes: two", "classes.gh200.nodes",
         r"valid integer"),
    Case("wrong-type-list", [("namespaces: [vision-lab]", "namespaces: vision-lab")], "namespaces: vision-lab",
         "groups.vision-lab.namespaces", r"valid list"),
    Case("octal-looking-revision", [("targetRevision: main", "targetRevision: 0777")], "targetRevision",
         "cluster.gitops.targetRevision", r"valid string"),
    Case("label-value-yes", [("nvidia.com/gpu.product: NVIDIA-GH200-480GB", "nvidia.com/gpu.product: yes")],
         "gpu.product: yes", "classes.gh200.nodeSelector.nvidia.com/gpu.product", r"boolean; quote it"),
    Case("quantity-on", [("    cpu: 36", "    cpu: on")], "cpu: on", "groups.vision-lab.allocations.gh200.cpu",
         r"boolean"),
    Case("bad-dns-class-name", [("\n  gh200:\n    description", "\n  GH200:\n    description")], "  GH200:",
         "classes.GH200", r"should match pattern"),
    Case("bad-dns-namespace", [("namespaces: [vision-lab]", "namespaces: [Vision_Lab]")], "Vision_Lab",
         "groups.vision-lab.namespaces[0]", r"should match pattern"),
    Case("runtime-name-too-long", [("\n  gh200:\n    description", "\n  " + "g" * 60 + ":\n    description")],
         "g" * 60, "classes." + "g" * 60, r"longer than 63"),
    Case("unknown-class-in-allocation", [("    allocations:\n      gh200:", "    allocations:\n      h100:")],
         "h100:", "groups.vision-lab.allocations.h100", r"unknown class 'h100'"),
    Case("oversubscribed-gpus", [(VISION_GPUS, VISION_GPUS.replace("gpus: 1", "gpus: 2"))], "        gpus: 1",
         "groups.nlp-lab.allocations.gh200.gpus", r"gpus oversubscribed: groups are allocated 3 .* = 2"),
    Case("oversubscribed-memory", [("        memory: 240G", "        memory: 800G")], "        memory: 240G",
         "groups.nlp-lab.allocations.gh200.memory", r"memory oversubscribed: .*1040G.*960G"),
    Case("duplicate-namespace", [("[nlp-lab, nlp-lab-teaching]", "[nlp-lab, vision-lab]")], "[nlp-lab, vision-lab]",
         "groups.nlp-lab.namespaces[1]",
         r"^group 'nlp-lab' and group 'vision-lab' \(\S+gpu_classes.yaml:\d+:\d+\) would both render "
         r"Namespace vision-lab"),
    Case("namespace-listed-twice", [("[nlp-lab, nlp-lab-teaching]", "[nlp-lab, nlp-lab]")], "[nlp-lab, nlp-lab]",
         "groups.nlp-lab.namespaces[1]", r"^group 'nlp-lab' would render Namespace nlp-lab twice \(also from \S+:\d+:"),
    Case("two-classes-one-flavor",
         [("\ngroups:\n", "  h100:\n    arch: amd64\n    nodeSelector: {nvidia.com/gpu.product: H100}\n"
                          "    flavor: gh200\n"
                          f"    {GH200_IMAGE}\n    nodes: 1\n    perNode: {{gpus: 1, cpu: 72, memory: 480G}}\n"
                          "\ngroups:\n")],
         "flavor: gh200", "classes.h100.flavor", r"class 'h100' and class 'gh200' \(\S+:\d+:\d+\) would both render "
                                                 r"ResourceFlavor gh200"),
    Case("image-latest", [(GH200_IMAGE, "image: ghcr.io/urcf/pytorch:latest")], "pytorch:latest",
         "classes.gh200.image", r":latest"),
    Case("image-untagged", [(GH200_IMAGE, "image: ghcr.io/urcf/pytorch")], "image: ghcr.io/urcf/pytorch",
         "classes.gh200.image", r"no tag"),
    Case("image-malformed", [(GH200_IMAGE, "image: ghcr.io/URCF/PyTorch:2.9")], "PyTorch", "classes.gh200.image",
         r"not a well-formed image reference"),
    Case("class-without-shared-label-key",
         [("nvidia.com/gpu.product: NVIDIA-GH200-480GB", "kubernetes.io/arch: arm64")], "    nodeSelector:",
         "classes.gh200.nodeSelector", r"must set the cluster's GPU class label"),
    Case("bad-arch", [("arch: arm64", "arch: aarch64")], "arch: aarch64", "classes.gh200.arch", r"'arm64' or 'amd64'"),
    Case("negative-gpus", [("        gpus: 1", "        gpus: -1")], "gpus: -1",
         "groups.vision-lab.allocations.gh200.gpus", r"greater than or equal to 0"),
    Case("zero-nodes", [("    nodes: 2", "    nodes: 0")], "nodes: 0", "classes.gh200.nodes",
         r"greater than or equal to 1"),
    Case("malformed-quantity", [("        memory: 240G", "        memory: 240 GB")], "240 GB",
         "groups.vision-lab.allocations.gh200.memory", r"not a Kubernetes quantity"),
    Case("cache-not-under-personal", [("HF_HOME: /personal/.cache/huggingface", "HF_HOME: /tmp/hf")], "HF_HOME",
         "cluster.cacheEnv.HF_HOME", r"not under the home mount /personal"),
    Case("cache-variable-missing", [("    TRITON_CACHE_DIR: /personal/.cache/triton\n", "")], "  cacheEnv:",
         "cluster.cacheEnv", r"TRITON_CACHE_DIR is missing"),
    Case("borrowing-limit-without-cohort",
         [("    namespaces: [vision-lab]\n    cohort: flame\n", "    namespaces: [vision-lab]\n"),
          ("        memory: 240G\n", "        memory: 240G\n        borrowingLimit: {gpus: 1}\n")],
         "borrowingLimit", "groups.vision-lab.allocations.gh200.borrowingLimit", r"needs the group to have a cohort"),
    Case("lending-more-than-nominal",
         [("        memory: 240G\n", "        memory: 240G\n        lendingLimit: {gpus: 2}\n")],
         "lendingLimit", "groups.vision-lab.allocations.gh200.lendingLimit.gpus", r"more than the nominal"),
    Case("default-nodes-exceed-class", [("    numNodes: 1", "    numNodes: 3")], "numNodes: 3",
         "classes.gh200.numNodes", r"exceeds the class's 2 nodes"),
    # Accelerators other than whole NVIDIA GPUs: the class's resource, its unit, time-slicing, classes on one node pool.
    Case("malformed-mig-profile",
         [(f"    {GH200_IMAGE}\n", f"    {GH200_IMAGE}\n    accelerator: {{resource: nvidia.com/mig-1g10gb}}\n")],
         "mig-1g10gb", "classes.gh200.accelerator.resource", r"'1g10gb' is not a MIG profile"),
    Case("resource-without-domain",
         [(f"    {GH200_IMAGE}\n", f"    {GH200_IMAGE}\n    accelerator: {{resource: gpu}}\n")],
         "resource: gpu", "classes.gh200.accelerator.resource", r"has no domain"),
    Case("resource-not-a-qualified-name",
         [(f"    {GH200_IMAGE}\n", f"    {GH200_IMAGE}\n    accelerator: {{resource: amd.com/gpu!}}\n")],
         "amd.com/gpu!", "classes.gh200.accelerator.resource", r"not an extended resource name"),
    Case("resource-of-kubernetes",
         [(f"    {GH200_IMAGE}\n", f"    {GH200_IMAGE}\n    accelerator: {{resource: kubernetes.io/gpu}}\n")],
         "kubernetes.io/gpu", "classes.gh200.accelerator.resource", r"Kubernetes' own"),
    Case("zero-units-per-node", [("      gpus: 1\n      cpu: 72", "      gpus: 0\n      cpu: 72")], "gpus: 0",
         "classes.gh200.perNode.gpus", r"greater than or equal to 1"),
    Case("time-slices-not-whole",
         [(f"    {GH200_IMAGE}\n", f"    {GH200_IMAGE}\n    accelerator:\n      resource: nvidia.com/gpu.shared\n"
                                f"      timeSlicing: {{replicas: 2.5}}\n")],
         "replicas: 2.5", "classes.gh200.accelerator.timeSlicing.replicas", r"valid integer"),
    Case("time-slices-quoted",
         [(f"    {GH200_IMAGE}\n", f"    {GH200_IMAGE}\n    accelerator:\n      resource: nvidia.com/gpu.shared\n"
                                f"      timeSlicing: {{replicas: \"4\"}}\n")],
         "replicas: ", "classes.gh200.accelerator.timeSlicing.replicas", r"valid integer"),
    Case("time-slices-per-node-not-a-multiple",
         [(f"    {GH200_IMAGE}\n", f"    {GH200_IMAGE}\n    accelerator:\n      resource: nvidia.com/gpu.shared\n"
                                f"      timeSlicing: {{replicas: 4}}\n")],
         "      gpus: 1\n      cpu: 72", "classes.gh200.perNode.gpus", r"not a whole number of GPUs shared 4 ways"),
    Case("two-classes-same-nodes-same-resource",
         [("\ngroups:\n", "  h100:\n    arch: arm64\n    nodeSelector: {nvidia.com/gpu.product: NVIDIA-GH200-480GB}\n"
                          f"    {GH200_IMAGE}\n    nodes: 2\n    perNode: {{gpus: 1, cpu: 72, memory: 480G}}\n"
                          "\ngroups:\n")],
         "{nvidia.com/gpu.product: NVIDIA-GH200-480GB}", "classes.h100.nodeSelector.nvidia.com/gpu.product",
         r"already selects class 'gh200', which requests nvidia.com/gpu too"),
    Case("mig-classes-disagree-on-their-nodes",
         [("\ngroups:\n", "  gh200-mig:\n    arch: arm64\n"
                          "    nodeSelector: {nvidia.com/gpu.product: NVIDIA-GH200-480GB}\n"
                          "    accelerator: {resource: nvidia.com/mig-1g.12gb}\n"
                          f"    {GH200_IMAGE}\n    nodes: 1\n    perNode: {{gpus: 7, cpu: 72, memory: 480G}}\n"
                          "\ngroups:\n")],
         "  gh200-mig:", "classes.gh200-mig", r"selects the nodes of class 'gh200' .* write the same nodes"),
    Case("mig-classes-share-the-nodes-cpu",
         [("\ngroups:\n", "  gh200-mig:\n    arch: arm64\n"
                          "    nodeSelector: {nvidia.com/gpu.product: NVIDIA-GH200-480GB}\n"
                          "    accelerator: {resource: nvidia.com/mig-1g.12gb}\n"
                          f"    {GH200_IMAGE}\n    nodes: 2\n    perNode: {{gpus: 7, cpu: 72, memory: 480G}}\n"
                          "\ngroups:\n"),
          ("        memory: 240G\n  nlp-lab:", "        memory: 240G\n      gh200-mig: {gpus: 7, cpu: 73, memory: 0}\n"
                                              "  nlp-lab:")],
         "gh200-mig: {gpus: 7", "groups.vision-lab.allocations.gh200-mig.cpu",
         r"the nodes of classes gh200, gh200-mig cpu oversubscribed: groups are allocated 145 "
         r"\(vision-lab on gh200 36"),
    # Classes on one node pool share its pod slots as they share its CPU and memory.
    Case("mig-classes-share-the-nodes-pods",
         [("\ngroups:\n", "  gh200-mig:\n    arch: arm64\n"
                          "    nodeSelector: {nvidia.com/gpu.product: NVIDIA-GH200-480GB}\n"
                          "    accelerator: {resource: nvidia.com/mig-1g.12gb}\n"
                          f"    {GH200_IMAGE}\n    nodes: 2\n    perNode: {{gpus: 7, cpu: 72, memory: 480G}}\n"
                          "\ngroups:\n"),
          ("        memory: 240G\n  nlp-lab:", "        memory: 240G\n"
                                              "      gh200-mig: {gpus: 7, cpu: 1, memory: 1G, pods: 150}\n"
                                              "  nlp-lab:")],
         "gh200-mig: {gpus: 7", "groups.vision-lab.allocations.gh200-mig.pods",
         r"the nodes of classes gh200, gh200-mig pods oversubscribed: groups are allocated 260 "
         r"\(vision-lab on gh200 55, nlp-lab on gh200 55, vision-lab on gh200-mig 150\) but 2 nodes x 110 = 220"),
    Case("mig-classes-disagree-on-their-pods",
         [("\ngroups:\n", "  gh200-mig:\n    arch: arm64\n"
                          "    nodeSelector: {nvidia.com/gpu.product: NVIDIA-GH200-480GB}\n"
                          "    accelerator: {resource: nvidia.com/mig-1g.12gb}\n"
                          f"    {GH200_IMAGE}\n    nodes: 2\n"
                          "    perNode: {gpus: 7, cpu: 72, memory: 480G, pods: 250}\n"
                          "\ngroups:\n")],
         "  gh200-mig:", "classes.gh200-mig", r"write the same nodes, perNode.cpu, perNode.memory and perNode.pods"),
    # A resource under a vendor's domain is one its device plugin advertises; another needs unknownVendor.
    *[Case(f"resource-its-plugin-never-advertises-{resource.replace('/', '-')}",
           [with_accelerator(f"{{resource: {resource}}}")],
           resource, "classes.gh200.accelerator.resource",
           rf"{vendor}'s device plugin advertises no {re.escape(resource)}")
      for resource, vendor in [("habana.ai/gaudi3", "Intel Gaudi"), ("amd.com/gpus", "AMD"),
                               ("nvidia.com/h100", "NVIDIA"), ("nvidia.com/gpu.shard", "NVIDIA"),
                               ("gpu.intel.com/gpu", "Intel GPU")]],
    Case("resource-of-a-vendor-gpugen-does-not-know",
         [with_accelerator("{resource: example.com/npu}")],
         "example.com/npu", "classes.gh200.accelerator.resource",
         r"gpugen knows no device plugin under example.com .*set accelerator.unknownVendor: true"),
    Case("unknown-vendor-said-of-a-known-resource",
         [with_accelerator("{resource: amd.com/gpu, unknownVendor: true}")],
         "amd.com/gpu, unknownVendor", "classes.gh200.accelerator.unknownVendor",
         r"amd.com/gpu is a resource AMD's device plugin advertises"),
    Case("shared-resource-without-time-slicing",
         [with_accelerator("{resource: nvidia.com/mig-1g.12gb.shared}")],
         "mig-1g.12gb.shared", "classes.gh200.accelerator.resource", r"accelerator.timeSlicing.replicas"),
    Case("mig-attribute-the-plugin-never-writes",
         [with_accelerator("{resource: nvidia.com/mig-1g.12gb.foo}")],
         "mig-1g.12gb.foo", "classes.gh200.accelerator.resource", r"'1g.12gb.foo' is not a MIG profile"),
    # Free text: refused where no output can show it as written (generator/freetext.py).
    *[Case(f"free-text-{name}", [(at, edit)], at_line, field_path, reason)
      for name, at, edit, at_line, field_path, reason in [
          ("bidi-override-in-a-description",
           "    description: NVIDIA GH200 Grace Hopper Superchip (H200 GPU, 72-core Grace CPU, NVLink-C2C)",
           '    description: "NVIDIA \\u202eGH200"', "description: \"NVIDIA",
           "classes.gh200.description", r"U\+202E, an invisible format character"),
          ("zero-width-space-in-a-group-description",
           "    description: Computer vision research group", '    description: "Computer\\u200bvision"',
           "Computer", "groups.vision-lab.description", r"U\+200B"),
          ("control-character-in-a-cache-value",
           "    HF_HOME: /personal/.cache/huggingface", '    HF_HOME: "/personal/\\x1b[31m"', "HF_HOME",
           "cluster.cacheEnv.HF_HOME", r"holds character U\+001B"),
          ("line-break-in-a-cache-value",
           "    HF_HOME: /personal/.cache/huggingface", '    HF_HOME: "/personal\\n/x"', "HF_HOME",
           "cluster.cacheEnv.HF_HOME", r"holds a line break"),
          ("line-separator-in-a-priority-description",
           "    description: The default", '    description: "The\\u2028default"', "The\\u2028",
           "priorities.normal.description", r"holds character U\+2028"),
          ("grafana-variable-in-a-group-description",
           "    description: Computer vision research group", "    description: Computer vision ${__user.login}",
           "${__user", "groups.vision-lab.description", r"Grafana"),
          ("blank-unit", *with_accelerator('{unit: "  "}'), "unit:",
           "classes.gh200.accelerator.unit", r"only whitespace"),
          ("formula-unit", *with_accelerator('{unit: "=1+1"}'),
           "unit:", "classes.gh200.accelerator.unit", r"spreadsheet"),
          ("grafana-variable-in-a-unit", *with_accelerator("{unit: $gpu}"),
           "unit:", "classes.gh200.accelerator.unit", r"Grafana"),
      ]],
    # Research groups' access and namespaces (issue 11).
    Case("identity-in-two-groups", [("        - oidc:nlp-lab\n", "        - oidc:vision-lab\n")], "- oidc:vision-lab",
         "groups.nlp-lab.identities.groups[0]", r"'oidc:vision-lab' already belongs to group 'vision-lab'",
         occurrence=2),
    Case("user-in-two-groups",
         [("        - oidc:vision-lab\n", "        - oidc:vision-lab\n      users: [alice@example.org]\n"),
          ("        - oidc:nlp-lab\n", "        - oidc:nlp-lab\n      users: [bob@example.org, alice@example.org]\n")],
         "alice@example.org", "groups.nlp-lab.identities.users[1]",
         r"user 'alice@example.org' already belongs to group 'vision-lab'",
         occurrence=2),
    Case("identity-listed-twice", [("        - oidc:nlp-lab\n", "        - oidc:nlp-lab\n        - oidc:nlp-lab\n")],
         "- oidc:nlp-lab", "groups.nlp-lab.identities.groups[1]", r"listed twice", occurrence=2),
    Case("kubernetes-identity-as-member", [("        - oidc:vision-lab\n", "        - system:authenticated\n")],
         "system:authenticated", "groups.vision-lab.identities.groups[0]", r"Kubernetes' own identities"),
    Case("research-namespace-kube-system", [("namespaces: [vision-lab]", "namespaces: [kube-system]")], "kube-system",
         "groups.vision-lab.namespaces[0]", r"'kube-system' belongs to the platform"),
    Case("research-namespace-kube-prefix", [("namespaces: [vision-lab]", "namespaces: [kube-vision]")], "kube-vision",
         "groups.vision-lab.namespaces[0]", r"kube- prefix is reserved"),
    Case("research-namespace-of-kueue", [("[nlp-lab, nlp-lab-teaching]", "[nlp-lab, kueue-system]")],
         "nlp-lab, kueue-system]", "groups.nlp-lab.namespaces[1]", r"'kueue-system' belongs to the platform"),
    Case("research-namespace-of-argo-cd", [("namespaces: [vision-lab]", "namespaces: [argocd]")], "[argocd]",
         "groups.vision-lab.namespaces[0]", r"'argocd' belongs to the platform"),
    # reserved_namespaces follows the inventory: Kueue moved into a namespace a group also lists.
    Case("research-namespace-of-a-moved-component",
         [("    kueue: {install: true, namespace: kueue-system",
           "    kueue: {install: true, namespace: nlp-lab-teaching")],
         "nlp-lab-teaching]", "groups.nlp-lab.namespaces[1]", r"'nlp-lab-teaching' belongs to the platform"),
    # Monitoring: the site's namespace is the platform's, its settings are checked field by field.
    Case("research-namespace-of-monitoring", [("namespaces: [vision-lab]", "namespaces: [monitoring]")],
         "[monitoring]", "groups.vision-lab.namespaces[0]", r"'monitoring' belongs to the platform"),
    Case("monitoring-zero-scrape-interval", [("    scrapeInterval: 15s", "    scrapeInterval: 0s")], "0s",
         "cluster.monitoring.scrapeInterval", r"zero"),
    Case("monitoring-runbook-not-a-url",
         [("    runbookURL: https://github.com/urcf/flame-gitops/blob/main/docs/monitoring.md",
           "    runbookURL: docs/monitoring.md")],
         "docs/monitoring.md", "cluster.monitoring.runbookURL", r"should match pattern"),
    Case("monitoring-unknown-scrape", [("    scrapeInterval: 15s", "    scrape: podMonitors")], "podMonitors",
         "cluster.monitoring.scrape", r"'serviceMonitors' or 'none'"),
    Case("monitoring-selector-label-invalid",
         [("    scrapeInterval: 15s", "    selectorLabels: {release: -bad-}")], "-bad-",
         "cluster.monitoring.selectorLabels.release", r"label value"),
    # Public registries of the image check: a registry as an image reference names it, a token service URL.
    Case("public-registry-with-scheme",
         [("    kyverno: {install: true, namespace: kyverno}",
           "    kyverno:\n      install: true\n      namespace: kyverno\n      publicRegistries:\n"
           "        https://ghcr.io: {}")],
         "https://ghcr.io", "cluster.components.kyverno.publicRegistries", r"should match pattern"),
    Case("public-registry-token-service-not-a-url",
         [("    kyverno: {install: true, namespace: kyverno}",
           "    kyverno:\n      install: true\n      namespace: kyverno\n      publicRegistries:\n"
           "        ghcr.io: {tokenService: ghcr.io/token}")],
         "tokenService: ghcr.io/token", "cluster.components.kyverno.publicRegistries.ghcr.io.tokenService",
         r"should match pattern"),
    Case("public-registry-docker-hub-twice",
         [("    kyverno: {install: true, namespace: kyverno}",
           "    kyverno:\n      install: true\n      namespace: kyverno\n      publicRegistries:\n"
           "        docker.io: {}\n        index.docker.io: {}")],
         "publicRegistries:", "cluster.components.kyverno.publicRegistries", r"both Docker Hub"),
    # The research-computing contract: weights, priorities and walltimes that are invalid or contradict.
    Case("weight-negative", [("    cohort: flame\n", "    cohort: flame\n    weight: -1\n")], "weight: -1",
         "groups.vision-lab.weight", r"negative"),
    Case("weight-as-float", [("    cohort: flame\n", "    cohort: flame\n    weight: 1.5\n")], "weight: 1.5",
         "groups.vision-lab.weight", r"YAML float"),
    Case("weight-without-fair-sharing", [("    fairSharing: true", "    fairSharing: false"),
                                         ("    cohort: flame\n", "    cohort: flame\n    weight: 2\n")],
         "weight: 2", "groups.vision-lab.weight", r"needs cluster.queueing.fairSharing"),
    Case("two-default-priorities", [("    value: 1000\n", "    value: 1000\n    default: true\n")],
         "default: true", "priorities.normal.default", r"already the default", occurrence=2),
    Case("no-default-priority", [("    default: true\n", "")], "priorities:", "priorities",
         r"no priority is marked default"),
    Case("unknown-group-priority", [("priorities: [normal, preemptible]", "priorities: [normal, urgent]")],
         "priorities: [normal, urgent]", "groups.nlp-lab.priorities[1]", r"unknown priority 'urgent'"),
    Case("group-default-not-allowed", [("priorities: [normal, preemptible]", "priorities: [deadline, preemptible]")],
         "priorities: [deadline, preemptible]", "groups.nlp-lab.priorities", r"default priority 'normal' is not among"),
    Case("priority-value-out-of-int32", [("    value: 1000\n", "    value: 3000000000\n")], "value: 3000000000",
         "priorities.deadline.value", r"less than or equal to 2147483647"),
    Case("walltime-default-over-maximum", [("      default: 24h\n", "      default: 8d\n")], "default: 8d",
         "classes.gh200.walltime.default", r"longer than the maximum 7d"),
    Case("walltime-malformed", [("      maximum: 7d\n", "      maximum: 7 days\n")], "maximum: 7 days",
         "classes.gh200.walltime.maximum", r"should match pattern"),
    Case("walltime-zero", [("      maximum: 7d\n", "      maximum: 0s\n")], "maximum: 0s",
         "classes.gh200.walltime.maximum", r"zero"),
    Case("group-walltime-on-foreign-class",
         [("    cohort: flame\n", "    cohort: flame\n    walltime:\n      a100: {maximum: 1d}\n")],
         "a100: {maximum", "groups.vision-lab.walltime.a100", r"no allocation on class 'a100'"),
    Case("group-walltime-contradicts-class-default",
         [("    cohort: flame\n", "    cohort: flame\n    walltime:\n      gh200: {maximum: 12h}\n")],
         "maximum: 12h", "groups.vision-lab.walltime.gh200.maximum",
         r"default walltime 1d on gh200 is longer than its maximum 12h"),
    Case("gpus-beyond-int64", [(VISION_GPUS, VISION_GPUS.replace("gpus: 1", "gpus: 99999999999999999999999"))],
         "gpus: 9999", "groups.vision-lab.allocations.gh200.gpus", r"less than or equal to 9223372036854775807"),
    # Within capacity (the class has as many nodes), but the pods quota derived from the GPUs overflows int64.
    Case("derived-pods-quota-beyond-int64",
         [("    nodes: 2\n", "    nodes: 9223372036854775807\n"),
          (VISION_GPUS, VISION_GPUS.replace("gpus: 1", "gpus: 100000000000000000"))],
         "gpus: 1000", "groups.vision-lab.allocations.gh200.gpus", r"pods quota of 11000000000000000000.*set pods"),
    Case("num-nodes-beyond-int32", [("    nodes: 2\n", "    nodes: 3000000000\n"),
                                    ("    numNodes: 1", "    numNodes: 3000000000")],
         "numNodes: 3", "classes.gh200.numNodes", r"less than or equal to 2147483647"),
    Case("node-selector-over-kueue-flavor-limit",
         [("      nvidia.com/gpu.product: NVIDIA-GH200-480GB\n",
           "      nvidia.com/gpu.product: NVIDIA-GH200-480GB\n"
           + "".join(f"      example.org/l{i}: v\n" for i in range(8)))],
         "    nodeSelector:", "classes.gh200.nodeSelector", r"9 labels; .*ResourceFlavor holds at most 8"),
    Case("tolerations-over-kueue-flavor-limit",
         [("    numNodes: 1\n", "    numNodes: 1\n    tolerations:\n"
           + "".join(f"      - {{key: example.org/t{i}, operator: Exists}}\n" for i in range(9)))],
         "    tolerations:", "classes.gh200.tolerations", r"9 tolerations; .*at most 8"),
    Case("toleration-seconds-beyond-int64",
         [("    numNodes: 1\n", "    numNodes: 1\n    tolerations:\n      - {key: example.org/t, operator: Exists, "
           "effect: NoExecute, tolerationSeconds: 99999999999999999999}\n")],
         "tolerationSeconds", "classes.gh200.tolerations[0].tolerationSeconds", r"less than or equal to"),
    # 65 classes with an allocation each: more flavors than one ClusterQueue resource group holds.
    Case("allocations-over-kueue-flavor-limit",
         [("\ngroups:\n", "".join(f"  c{i:02d}:\n    arch: arm64\n    nodeSelector:\n"
                                  f"      nvidia.com/gpu.product: G{i}\n"
                                  f"    {GH200_IMAGE}\n    nodes: 1\n    perNode: {{gpus: 1, cpu: 72, memory: 480G}}\n"
                                  for i in range(64)) + "\ngroups:\n"),
          (VISION_GPUS, VISION_GPUS.replace("    allocations:\n", "    allocations:\n" + "".join(
              f"      c{i:02d}: {{gpus: 1, cpu: 1, memory: 1G}}\n" for i in range(64))))],
         "    allocations:", "groups.vision-lab.allocations", r"allocations on 65 classes.*at most 64 flavors"),
    # 61 classes of a resource each beside gh200's: 62 accelerator resources, with cpu, memory and pods 65 covered
    # resources, more than one ClusterQueue resource group holds (within its 64 flavors).
    Case("covered-resources-over-kueue-limit",
         [("\ngroups:\n", "".join(f"  n{i:02d}:\n    arch: amd64\n    nodeSelector:\n"
                                  f"      nvidia.com/gpu.product: N{i}\n"
                                  f"    accelerator: {{resource: example.com/npu-{i}, unknownVendor: true}}\n"
                                  f"    {GH200_IMAGE}\n    nodes: 1\n    perNode: {{gpus: 1, cpu: 72, memory: 480G}}\n"
                                  for i in range(61)) + "\ngroups:\n"),
          (VISION_GPUS, VISION_GPUS.replace("    allocations:\n", "    allocations:\n" + "".join(
              f"      n{i:02d}: {{gpus: 1, cpu: 1, memory: 1G}}\n" for i in range(61))))],
         "    allocations:", "groups.vision-lab.allocations",
         r"allocations on classes of 62 accelerator resources.*at most 64 resources there"),
    Case("finished-job-ttl-too-long", [("    finishedJobTTL: 7d", "    finishedJobTTL: 30000d")], "finishedJobTTL",
         "cluster.queueing.finishedJobTTL", r"int32"),
    # Several clusters (docs/multi-cluster.md).
    Case("class-names-a-cluster-without-clusters", [(GH200_WALLTIME, GH200_WALLTIME + "    cluster: flame\n")],
         "cluster: flame", "classes.gh200.cluster", r"declares no clusters"),
    Case("several-clusters-with-monitoring", [CLUSTERS, ON_FLAME], "  monitoring:", "cluster.monitoring",
         r"gpugen monitors one cluster"),
    Case("no-manager", [(CLUSTERS[0], CLUSTERS[1].replace("role: manager", "role: worker")), ON_FLAME],
         "clusters:", "clusters", r"no cluster has role: manager"),
    Case("two-managers", [with_cluster("hub2: {role: manager, server: https://hub2.example.org}"), ON_FLAME],
         "hub2:", "clusters.hub2.role", r"'hub' is already the manager"),
    Case("one-api-server-twice", [(CLUSTERS[0], CLUSTERS[1].replace("flame.example.org", "hub.example.org")), ON_FLAME],
         "flame: {role", "clusters.flame.server", r"already the API server of cluster 'hub'"),
    Case("api-server-not-https", [(CLUSTERS[0], CLUSTERS[1].replace("https://flame", "http://flame")), ON_FLAME],
         "flame: {role", "clusters.flame.server", r"should match pattern"),
    Case("api-server-port-out-of-range",
         [(CLUSTERS[0], CLUSTERS[1].replace("flame.example.org:6443", "flame.example.org:65536")), ON_FLAME],
         "flame: {role", "clusters.flame.server", r"port 65536 is outside 1-65535"),
    Case("api-server-port-zero", [(CLUSTERS[0], CLUSTERS[1].replace("hub.example.org:6443", "hub.example.org:0")),
                                  ON_FLAME],
         "hub: {role", "clusters.hub.server", r"port 0 is outside 1-65535"),
    Case("one-api-server-in-two-spellings",
         [(CLUSTERS[0], CLUSTERS[1].replace("https://flame.example.org:6443", "https://HUB.example.org.:6443/")),
          ON_FLAME],
         "flame: {role", "clusters.flame.server",
         r"HUB.example.org.:6443/ is already the API server of cluster 'hub' \(\S+:\d+:\d+, written "
         r"https://hub.example.org:6443\)"),
    Case("one-api-server-with-and-without-its-default-port",
         [(CLUSTERS[0], CLUSTERS[1].replace("https://hub.example.org:6443", "https://hub.example.org")
           .replace("https://flame.example.org:6443", "https://hub.example.org:443")), ON_FLAME],
         "flame: {role", "clusters.flame.server", r"already the API server of cluster 'hub'"),
    Case("worker-at-the-in-cluster-address",
         [(CLUSTERS[0], CLUSTERS[1].replace("https://flame.example.org:6443", "https://kubernetes.default.svc:443/")),
          ON_FLAME],
         "flame: {role", "clusters.flame.server", r"is the in-cluster address, where Argo CD reaches the manager"),
    Case("worker-at-the-in-cluster-address-by-its-cluster-domain",
         [(CLUSTERS[0], CLUSTERS[1].replace("https://flame.example.org:6443",
                                            "https://kubernetes.default.svc.cluster.local")), ON_FLAME],
         "flame: {role", "clusters.flame.server", r"in-cluster address"),
    Case("class-names-no-cluster", [CLUSTERS], "  gh200:", "classes.gh200", r"must name the worker.*workers: flame"),
    Case("class-on-an-unknown-cluster", [CLUSTERS, (GH200_WALLTIME, GH200_WALLTIME + "    cluster: ember\n")],
         "cluster: ember", "classes.gh200.cluster", r"unknown cluster 'ember'"),
    Case("class-on-the-manager", [CLUSTERS, (GH200_WALLTIME, GH200_WALLTIME + "    cluster: hub\n")],
         "cluster: hub", "classes.gh200.cluster", r"'hub' is the manager"),
    Case("cluster-component-neither-installed-nor-existing",
         [(CLUSTERS[0], CLUSTERS[1].replace("flame.example.org:6443}", "flame.example.org:6443, "
                                            "components: {kyverno: {install: false}}}")), ON_FLAME],
         "flame: {role", "clusters.flame.components.kyverno.install", r"not installed on cluster 'flame'"),
    Case("research-namespace-of-a-cluster-component",
         [(CLUSTERS[0], CLUSTERS[1].replace("flame.example.org:6443}", "flame.example.org:6443, "
                                            "components: {kueue: {namespace: vision-lab}}}")), ON_FLAME],
         "namespaces: [vision-lab]", "groups.vision-lab.namespaces[0]", r"'vision-lab' belongs to the platform"),
    Case("group-applications-with-several-clusters",
         [CLUSTERS, ON_FLAME, ("    applicationName: flame-training-platform\n",
                               "    applicationName: flame-training-platform\n    groupApplications: 4\n")],
         "groupApplications: 4", "cluster.gitops.groupApplications",
         r"each cluster's tree is an Application of its own"),
    Case("no-group-application",
         [("    applicationName: flame-training-platform\n",
           "    applicationName: flame-training-platform\n    groupApplications: 0\n")],
         "groupApplications: 0", "cluster.gitops.groupApplications", r"greater than or equal to 1"),
    Case("worker-without-a-class",
         [with_cluster("ember: {role: worker, server: https://ember.example.org}"), ON_FLAME],
         "ember:", "clusters.ember", r"worker 'ember' runs no GPU class"),
]


def edited(case: Case) -> str:
    text = VALID
    for old, new in case.edits:
        if old == "":
            text = new
            continue
        assert old in text, f"{case.name}: the inventory no longer contains {old!r}; update the case"
        text = text.replace(old, new, 1)
    return text


def expected_line(text: str, case: Case) -> int:
    if not case.at:
        return 1
    position = -1
    for _ in range(case.occurrence):
        position = text.index(case.at, position + 1)
    return text[:position].count("\n") + 1


def render_args(root: Path) -> list[str]:
    return ["render", "--inventory", str(root / "gpu_classes.yaml"), "--out", str(root / "rendered"),
            "--bootstrap-out", str(root / "bootstrap"), "--docs-out", str(root / "docs" / "runtimes.md")]


@pytest.fixture(scope="module")
def good_render(tmp_path_factory) -> Path:
    """One render of the good inventory, which every workspace copies (a render per case costs more than a copy)."""
    root = tmp_path_factory.mktemp("good-render")
    (root / "gpu_classes.yaml").write_text(VALID, encoding="utf-8")
    result = CliRunner().invoke(main, render_args(root))
    assert result.exit_code == 0, result.output
    return root


@pytest.fixture()
def rendered_workspace(tmp_path, good_render):
    """A directory holding a good inventory's render, as a repository would."""
    shutil.copytree(good_render, tmp_path, dirs_exist_ok=True, symlinks=True)
    return tmp_path, tmp_path / "gpu_classes.yaml", render_args(tmp_path)


def test_corpus_is_large_enough():
    assert len(CASES) >= 25


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_invalid_inventory_exits_2_names_the_line_and_writes_nothing(case, rendered_workspace):
    root, inventory, args = rendered_workspace
    text = edited(case)
    inventory.write_text(text, encoding="utf-8")
    before = snapshot(root / "rendered"), snapshot(root / "bootstrap")

    result = CliRunner().invoke(main, args)

    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    line = expected_line(text, case)
    pattern = re.compile(rf"^{re.escape(str(inventory))}:(\d+):(\d+): (\S+): (.*)$")
    problems = [m.groups() for m in map(pattern.match, lines) if m]
    assert problems, result.stderr
    matching = [p for p in problems if int(p[0]) == line and case.field in p[2] and re.search(case.reason, p[3])]
    assert matching, f"expected line {line}, field {case.field!r}, reason /{case.reason}/ in:\n{result.stderr}"
    assert lines[-1].endswith("nothing written.")
    assert (snapshot(root / "rendered"), snapshot(root / "bootstrap")) == before


def test_check_mode_also_exits_2_on_an_invalid_inventory(rendered_workspace):
    _, inventory, args = rendered_workspace
    inventory.write_text(VALID.replace("    nodes: 2", "    nodes: two"), encoding="utf-8")
    result = CliRunner().invoke(main, [*args, "--check"])
    assert result.exit_code == 2


def test_missing_inventory_file_exits_2(tmp_path):
    result = CliRunner().invoke(main, ["render", "--inventory", str(tmp_path / "nope.yaml"), "--out",
                                       str(tmp_path / "out"), "--bootstrap-out", str(tmp_path / "boot")])
    assert result.exit_code == 2
    assert "nope.yaml:1:1: (file): cannot read" in result.stderr
    assert not (tmp_path / "out").exists()


def test_every_error_is_reported_not_just_the_first(rendered_workspace):
    _, inventory, args = rendered_workspace
    text = VALID.replace("    nodes: 2", "    nodes: two").replace("arch: arm64", "arch: sparc")
    inventory.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(main, args)
    assert "classes.gh200.nodes" in result.stderr and "classes.gh200.arch" in result.stderr
    assert "2 problem(s)" in result.stderr


def test_several_clusters_with_monitoring_are_refused_for_monitoring_alone(rendered_workspace):
    """FLAME's inventory spread over a manager and a worker breaks one rule only: monitoring is built for one
    cluster."""
    _root, inventory, args = rendered_workspace
    text = edited(Case("", [CLUSTERS, ON_FLAME], "", "", ""))
    inventory.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    line = text[:text.index("\n  monitoring:")].count("\n") + 2
    assert result.stderr.splitlines() == [
        f"{inventory}:{line}:3: cluster.monitoring: gpugen monitors one cluster; with clusters: remove monitoring: "
        "(docs/multi-cluster.md): its alerts would watch GPU nodes the manager does not have",
        f"{inventory}: 1 problem(s); nothing written."]
