"""Kubernetes' and the file system's limits, checked on every rendered object before anything is written.

The inventory's schema checks each field; these checks are about what the fields become, so they hold for
fields added later too: a name that fits its own field may still make a file name longer than 255 bytes,
a description that fits may still push an object's annotations past 256 KiB. Each check names the object
and its file; the CLI prints them as problems of the inventory, exit 2, nothing written.

- metadata.name: at most 253 characters (DNS subdomain length; 63 for a Namespace), metadata.namespace a DNS label;
- label keys and values: Kubernetes' syntax, values at most 63 characters;
- annotations: at most 256 KiB of keys and values together (apimachinery TotalAnnotationSizeLimitB);
- the object: at most 1.5 MiB as compact JSON (etcd's default request limit; the API server refuses more);
- CEL (Kyverno policies): an expression's runtime cost grows with its size (every literal is at least one
  cost unit), so a policy's expressions together are kept under Kubernetes' per-call limit of 1,000,000
  characters (PerCallLimit); this is an upper bound, not the real cost estimator;
- file names at most 255 bytes per path component and 4,096 bytes per path (Linux NAME_MAX, PATH_MAX).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any


MAX_NAME = 253
MAX_LABEL_VALUE = 63
MAX_ANNOTATIONS_BYTES = 256 * 1024
MAX_OBJECT_BYTES = 1536 * 1024
MAX_CEL_CHARACTERS = 1_000_000
MAX_FILE_NAME_BYTES = 255
MAX_PATH_BYTES = 4096
# Each generated object is one file; a tree far beyond the national scale (benchmarks/) is a mistake, and
# its size in memory would break the render's 500 MB bound before the file system's limits. With several
# clusters the bound holds for each cluster's tree (benchmarks/clusters_render.py measures the memory of all).
MAX_OBJECTS = 40_000

# Kubernetes' name syntax (apimachinery's validation), as patterns for the inventory schema and as checks here.
DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_DNS_LABEL = re.compile(DNS1123_LABEL)
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_SUBDOMAIN = re.compile(DNS1123_SUBDOMAIN)
# Below this YAML size the compact JSON cannot reach MAX_OBJECT_BYTES (JSON is at most ~2x block YAML).
_JSON_CHECK_FROM = MAX_OBJECT_BYTES // 3


@lru_cache(maxsize=65536)  # pure; every object repeats the same few label keys and values
def label_key_problem(key: str) -> str | None:
    """What is wrong with a label key ([prefix/]name), or None."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > MAX_NAME or not _SUBDOMAIN.fullmatch(prefix)):
        return f"label key {key!r}: the prefix must be a DNS subdomain of at most {MAX_NAME} characters"
    if len(name) > 63 or not _LABEL_NAME.fullmatch(name):
        return f"label key {key!r}: the name must be at most 63 alphanumerics, '-', '_' or '.'"
    return None


@lru_cache(maxsize=65536)
def label_value_problem(value: str) -> str | None:
    """What is wrong with a label value (empty is allowed), or None."""
    if value and (len(value) > MAX_LABEL_VALUE or not _LABEL_NAME.fullmatch(value)):
        return f"a label value is at most {MAX_LABEL_VALUE} alphanumerics, '-', '_' or '.'"
    return None


def _cel_characters(value: Any) -> int:
    if isinstance(value, dict):
        return sum(len(v) if k == "expression" and isinstance(v, str) else _cel_characters(v) for k, v in value.items())
    if isinstance(value, list):
        return sum(_cel_characters(item) for item in value)
    return 0


def object_problems(obj: dict[str, Any], path: str, manifest: bytes) -> list[str]:
    """What in `obj` (to be written at `path` as `manifest`) Kubernetes or the file system would refuse."""
    problems: list[str] = []
    meta = obj.get("metadata", {})
    name, namespace = meta.get("name", ""), meta.get("namespace")
    longest = 63 if obj.get("kind") == "Namespace" else MAX_NAME
    if not name or len(name) > longest or "/" in name or name in (".", ".."):
        problems.append(f"name {name[:80]!r} ({len(name)} characters) is not a valid object name "
                        f"(1 to {longest} characters, no '/')")
    if namespace is not None and (len(namespace) > 63 or not _DNS_LABEL.fullmatch(namespace)):
        problems.append(f"namespace {namespace[:80]!r} is not a DNS label of at most 63 characters")
    for key, value in meta.get("labels", {}).items():
        problem = label_key_problem(key)
        if problem is None and label_value_problem(value):
            problem = f"label {key}={value[:80]!r}: {label_value_problem(value)}"
        if problem:
            problems.append(problem)
    annotations = meta.get("annotations", {})
    annotation_bytes = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if annotation_bytes > MAX_ANNOTATIONS_BYTES:
        problems.append(
            f"annotations add up to {annotation_bytes:,} bytes; Kubernetes allows {MAX_ANNOTATIONS_BYTES:,}")
    if len(manifest) > _JSON_CHECK_FROM:
        size = len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode())
        if size > MAX_OBJECT_BYTES:
            problems.append(f"the object is {size:,} bytes as JSON; the API server and etcd take at most "
                            f"{MAX_OBJECT_BYTES:,}")
    if obj.get("apiVersion", "").startswith("policies.kyverno.io/"):
        characters = _cel_characters(obj.get("spec", {}))
        if characters > MAX_CEL_CHARACTERS:
            problems.append(f"its CEL expressions add up to {characters:,} characters, beyond what Kubernetes' CEL "
                            f"per-call cost limit ({MAX_CEL_CHARACTERS:,}) can be shown to allow")
    problems.extend(path_problems(path))
    return problems


def path_problems(path: str) -> list[str]:
    encoded = path.encode()
    problems = []
    if len(encoded) > MAX_PATH_BYTES:
        problems.append(f"its file path is {len(encoded):,} bytes; the limit is {MAX_PATH_BYTES:,}")
    for part in path.split("/"):
        if len(part.encode()) > MAX_FILE_NAME_BYTES:
            problems.append(f"its file name {part[:60]}... is {len(part.encode())} bytes; file systems allow "
                            f"{MAX_FILE_NAME_BYTES}: shorten the name it comes from")
    return problems
