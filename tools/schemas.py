#!/usr/bin/env python3
"""Generate strict JSON schemas for kubeconform from the pinned upstream sources.

    python3 tools/schemas.py CRD_DIR K8S_OPENAPI_V3_DIR OUT_DIR

Writes (openapi2jsonschema style, lower-case names):
  OUT_DIR/crd/<group>/<kind>_<version>.json   from every served version of every CRD in CRD_DIR
  OUT_DIR/core/<group>/<kind>_<version>.json  from Kubernetes' own OpenAPI v3 spec; <group> is
                                              `v1` for the core group, as kubeconform templates it.

"Strict" means: every object schema that lists properties and does not carry
x-kubernetes-preserve-unknown-fields gets additionalProperties: false, so an unknown
or misspelt field is an error instead of being ignored.
"""
import json
import pathlib
import sys

import yaml

# Keys that only document; dropping them keeps the inlined core schemas small.
_DROP = {"description", "example", "externalDocs"}


def walk(node, child):
    """Copy one schema node: drop doc keys, map `child` over its sub-schemas, make it strict."""
    if not isinstance(node, dict):
        return node
    out = {}
    for k, v in node.items():
        if k in _DROP:
            continue
        if k in ("properties", "patternProperties"):
            out[k] = {name: child(sub) for name, sub in v.items()}  # keys are field names
        elif k in ("items", "additionalProperties", "not") and isinstance(v, dict):
            out[k] = child(v)
        elif k in ("allOf", "anyOf", "oneOf", "items") and isinstance(v, list):
            out[k] = [child(sub) for sub in v]
        else:
            out[k] = v
    if out.get("x-kubernetes-int-or-string") and "type" not in out and "anyOf" not in out \
            and "oneOf" not in out:
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if out.get("nullable") and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    if "properties" in out and not out.get("x-kubernetes-preserve-unknown-fields") \
            and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def strict(node):
    """Return a JSON-schema copy of an OpenAPI v3 schema node, made strict."""
    return walk(node, strict)


def write(path, schema):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(schema, separators=(",", ":")))


def crd_schemas(crd_dir, out):
    n = 0
    for f in sorted(pathlib.Path(crd_dir).glob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            kind = spec["names"]["kind"].lower()
            for v in spec["versions"]:
                if not v.get("served"):
                    continue
                schema = v.get("schema", {}).get("openAPIV3Schema")
                if schema is None:
                    raise SystemExit(f"{f}: {kind} {v['name']} has no openAPIV3Schema")
                write(out / "crd" / spec["group"] / f"{kind}_{v['name']}.json", strict(schema))
                n += 1
    return n


class CoreResolver:
    """Inline the `#/components/schemas/...` references of one OpenAPI v3 document."""

    def __init__(self, components):
        self.components = components
        self.done = {}
        self.active = set()

    def ref(self, ref):
        name = ref.rsplit("/", 1)[-1]
        if name in self.done:
            return self.done[name]
        if name in self.active:  # recursive type: accept anything below this point
            return {}
        self.active.add(name)
        self.done[name] = self.resolve(self.components[name])
        self.active.discard(name)
        return self.done[name]

    def resolve(self, node):
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return self.ref(node["$ref"])
        # `allOf: [{$ref}]` plus a default/description is how the spec wraps a reference.
        all_of = node.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1 and "$ref" in all_of[0]:
            rest = {k: v for k, v in node.items() if k not in ("allOf", "default")}
            return {**self.ref(all_of[0]["$ref"]), **walk(rest, self.resolve)}
        return walk(node, self.resolve)


def core_schemas(openapi_dir, out):
    n = 0
    for f in sorted(pathlib.Path(openapi_dir).glob("*_openapi.json")):
        components = json.loads(f.read_text()).get("components", {}).get("schemas", {})
        resolver = CoreResolver(components)
        for name, schema in components.items():
            for gvk in schema.get("x-kubernetes-group-version-kind", []):
                # Only the document of the kind's own group/version is authoritative.
                group = gvk["group"] or "v1"
                expected = "api__v1_openapi.json" if not gvk["group"] else \
                    f"apis__{gvk['group']}__{gvk['version']}_openapi.json"
                if f.name != expected:
                    continue
                write(out / "core" / group / f"{gvk['kind'].lower()}_{gvk['version']}.json",
                      resolver.ref(name))
                n += 1
    return n


def main(argv):
    if len(argv) != 4:
        raise SystemExit(__doc__)
    crd_dir, openapi_dir, out = argv[1], argv[2], pathlib.Path(argv[3])
    n_crd = crd_schemas(crd_dir, out)
    n_core = core_schemas(openapi_dir, out)
    if not n_crd or not n_core:
        raise SystemExit(f"ERROR: no schemas generated (crd={n_crd}, core={n_core})")
    print(f"schemas: {n_crd} CRD, {n_core} core in {out}")


if __name__ == "__main__":
    main(sys.argv)
