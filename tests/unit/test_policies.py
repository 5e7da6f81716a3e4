"""The Kyverno policies, proven with the real kyverno CLI (`kyverno test`, version pinned in versions.env).

tests/policies/cases.yaml lists the cases: bypass attempts that must be denied by the right policy with the
right message, and legitimate objects (hand-written, and TrainJobs built by the real Kubeflow SDK) that every
policy must let through or mutate exactly into tests/policies/patched/. At test time this file renders the
policies from each inventory, groups the cases into kyverno test suites (one per inventory, user, mode and
operation) in a temporary directory, runs the CLI once over all of them, and checks every row it reports: the
CLI's own verdict, and that the row is the one expected (policy, object, reason, message). A policy that
does not apply is reported by the CLI as a pass ("Excluded"); such rows only count where a case says
`outside`.

Every suite gets the Trainer and JobSet CRDs from the Go module cache, the namespaces and their PVCs as cluster
resources, so the CLI uses its live context provider: `resource.List` reads those PVCs and `image.GetMetadata`
asks a real OCI registry (tests/oracles/registry, go-containerregistry's, on 127.0.0.1) for the images the
TrainJobs name. Suites whose cases give registry credentials run in a second CLI run with a DOCKER_CONFIG.

The CLI sends an UPDATE with the object as its own oldObject; the `updates:` cases, whose oldObject differs, are
evaluated by tests/oracles/kyverno-engine (Kyverno's CEL engine packages, built against the pinned module).
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import subprocess
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support import REPO, require_tool
from simulation.go_tools import ModuleUnavailable, cache_dir, go_program
from simulation import go_tools
from tests.support.kubeflow_sdk import train_job_from_sdk
from tests.support.policy_corpus import (CELPARSE_SOURCE, INVENTORIES, cel_go_version, expressions, kyverno_engine,
                                          kyverno_path)

from generator import emit
from generator.builders import cel_templates, core, kyverno, trainer
from generator.inventory import accelerators, load_inventory
from generator.inventory.models import Inventory
from generator.kinds import JOBSET
from generator.inventory.duration import seconds
from generator.inventory.naming import controller_identities, runtime_name
from generator.versions import pin
from tests.support.inventories import inventory as validated, variant
from tests.support.registry import (HTTP_BLOCKLIST, LOCALHOST_REGISTRY, REGISTRY, REGISTRY_PASSWORD, REGISTRY_USER,
                                    with_test_registry)
from simulation.waiting import ceiling

HERE = REPO / "tests" / "policies"
CASES_FILE = HERE / "cases.yaml"
TRAINER_CRDS = ("trainjobs", "trainingruntimes", "clustertrainingruntimes")
# Each kind a case sends: its API group and resource, as a policy's matchConstraints name them.
RESOURCE_OF = {"TrainJob": (trainer.API_VERSION.rpartition("/")[0], "trainjobs"), "Job": ("batch", "jobs"),
               "JobSet": (JOBSET.name, "jobsets"), "Pod": ("", "pods")}


@cache
def admission_policies(inventory: str) -> tuple[dict[str, Any], ...]:
    """The inventory's rendered policies that judge admission requests (not the DeletingPolicy), in render order."""
    return tuple(p for p in kyverno.policies(load_inventory(INVENTORIES[inventory]))
                 if p["kind"] in ("ValidatingPolicy", "MutatingPolicy"))


def matches(policy: dict[str, Any], kind: str, operation: str, subresource: str | None = None) -> bool:
    """Whether the policy's own matchConstraints take a request of this kind, operation and subresource."""
    group, plural = RESOURCE_OF[kind]
    resource = f"{plural}/{subresource}" if subresource else plural
    return any(group in rule["apiGroups"] and resource in rule["resources"]
               and (operation in rule["operations"] or "*" in rule["operations"])
               for rule in policy["spec"]["matchConstraints"]["resourceRules"])


@cache
def policies_for(kind: str, inventory: str, operation: str = "CREATE", subresource: str | None = None,
                 mutating: bool = True) -> tuple[str, ...]:
    """The policies the inventory renders that a request of this kind and operation meets (every one of them is
    checked for every case of that kind), read from their matchConstraints."""
    return tuple(p["metadata"]["name"] for p in admission_policies(inventory)
                 if matches(p, kind, operation, subresource) and (mutating or p["kind"] != "MutatingPolicy"))


FLAG = {"ValidatingPolicy": "isValidatingPolicy", "MutatingPolicy": "isMutatingPolicy"}  # kyverno-test.yaml
API_VERSIONS = {"TrainJob": trainer.API_VERSION, "Job": "batch/v1", "Pod": "v1",
                "JobSet": JOBSET.api_version}


# --- the case table ---------------------------------------------------------------------------------------

SPEC = yaml.safe_load(CASES_FILE.read_text())


@dataclass(frozen=True)
class Case:
    index: int
    kind: str
    namespace: str
    name: str
    user: str
    inventory: str = "flame"
    operation: str = "CREATE"
    deny: str | None = None
    message: str | None = None
    allow: bool = False
    mutate: str | None = None
    outside: bool = False
    sdk: dict[str, Any] | None = None
    patch: dict[str, Any] | None = None  # updates only: JSON merge patch from oldObject to object
    error: bool = False  # with deny: the policy cannot be evaluated (a registry error), which Kyverno denies
    claims: tuple[str, ...] = ("home", "workspace")  # the namespace's PVCs (cluster.storage entries)
    credentials: bool = False  # the CLI runs with credentials for the registry's private/ repositories
    subresource: str | None = None  # updates only

    @property
    def id(self) -> str:
        changed = f"#{self.index}" if self.patch is not None else ""  # updates: several per object
        claims = "" if self.claims == ("home", "workspace") else f"[claims={','.join(self.claims)}]"
        creds = "[credentials]" if self.credentials else ""
        return (f"{self.inventory}:{self.user}:{self.operation}:{self.kind}/{self.namespace}/{self.name}"
                f"{changed}{claims}{creds}")

    @property
    def key(self) -> tuple[str, str, str]:
        return self.kind, self.namespace, self.name

    @property
    def legitimate(self) -> bool:
        return self.allow or (self.mutate is not None and self.deny is None)


def parse_cases(spec: dict[str, Any], section: str = "cases") -> list[Case]:
    cases = []
    for index, raw in enumerate(spec[section]):
        raw = dict(raw)
        if section == "updates":
            assert "patch" in raw and "operation" not in raw and "mutate" not in raw and "sdk" not in raw, raw
            raw["operation"] = "UPDATE"
        kind, _, ref = raw.pop("object").partition(" ")
        namespace, _, name = ref.partition("/")
        if "claims" in raw:
            raw["claims"] = tuple(raw["claims"])
        case = Case(index=index, kind=kind, namespace=namespace, name=name, **raw)
        expectations = [case.deny is not None or case.mutate is not None, case.allow, case.outside]
        assert sum(expectations) == 1, f"case {case.id}: exactly one of deny and/or mutate, allow, outside"
        assert (case.deny is None) == (case.message is None), f"case {case.id}: deny needs a message and only deny"
        assert not case.error or case.deny, f"case {case.id}: error goes with deny"
        assert set(case.claims) <= {"home", "workspace"}, f"case {case.id}: claims are home and workspace"
        assert case.user in spec["users"], f"case {case.id}: unknown user {case.user}"
        assert case.kind in RESOURCE_OF, f"case {case.id}: no policies for kind {case.kind}"
        judging = policies_for(case.kind, case.inventory, case.operation, case.subresource)
        assert case.deny is None or case.deny in judging, f"case {case.id}: {case.deny} does not judge it"
        cases.append(case)
    ids = Counter(case.id for case in cases)
    assert not [i for i, n in ids.items() if n > 1], f"duplicate cases: {[i for i, n in ids.items() if n > 1]}"
    return cases


CASES = parse_cases(SPEC)
UPDATES = parse_cases(SPEC, "updates")


def username(user: str, inventory: Inventory) -> dict[str, Any]:
    entry = SPEC["users"][user]
    if "controller" in entry:
        return {"username": getattr(controller_identities(inventory), entry["controller"])}
    return {key: entry[key] for key in ("username", "groups") if key in entry}


def case_resources() -> dict[tuple[str, str, str], dict[str, Any]]:
    return resource_objects()


def resource_objects() -> dict[tuple[str, str, str], dict[str, Any]]:
    objects: dict[tuple[str, str, str], dict[str, Any]] = {}
    for path in sorted((HERE / "resources").glob("*.yaml")):
        for obj in yaml.safe_load_all(path.read_text()):
            key = (obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"])
            assert key not in objects, f"{path.name}: {key} defined twice"
            objects[key] = obj
    return objects


# --- building and running the suites ----------------------------------------------------------------------

@dataclass
class Suite:
    name: str
    inventory: str
    user: str
    claims: tuple[str, ...]
    credentials: bool
    operation: str
    cases: list[Case] = field(default_factory=list)
    expected: list[tuple[Case, str]] = field(default_factory=list)  # (case, policy) per result, in order


def dump(path: Path, *docs: dict[str, Any], images: dict[str, str] | None = None) -> None:
    """Test inputs as JSON documents (JSON is YAML without YAML 1.1's surprises; SDK bodies hold floats).
    `images` replaces placeholders (REGISTRY, DIGEST_...) in the text."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "---\n".join(json.dumps(doc, indent=1) + "\n" for doc in docs)
    for placeholder, value in sorted((images or {}).items(), key=lambda item: -len(item[0])):
        text = text.replace(placeholder, value)
    path.write_text(text)


def namespace_objects(names: set[str]) -> list[dict[str, Any]]:
    # The API server sets kubernetes.io/metadata.name on every namespace; the CLI needs to be told.
    return [{"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": ns, "labels": {kyverno.NAMESPACE_NAME_LABEL: ns}}} for ns in sorted(names)]


def claim_objects(inventory: Inventory, namespaces: set[str], claims: tuple[str, ...]) -> list[dict[str, Any]]:
    """The PVCs (cluster.storage's home and/or workspace claim) of each namespace."""
    storage = inventory.cluster.storage
    names = [getattr(storage, claim).claimName for claim in claims]
    # The CLI's fake cluster client lists only kinds it holds objects of: one PVC outside the research
    # namespaces keeps `resource.List` of PVCs working where a namespace has none (a real API server lists []).
    where = [(ns, name) for ns in sorted(namespaces) for name in names] + [("ops", "unrelated")]
    return [{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": ns},
             "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "100Gi"}}}}
            for ns, name in where]


def limits_objects(inventory: Inventory, namespaces: set[str]) -> list[dict[str, Any]]:
    """The job-limits ConfigMaps of the suite's research namespaces, as rendered."""
    return [obj for obj in core.job_limits(inventory) if obj["metadata"]["namespace"] in namespaces]


def _job_class(obj: dict[str, Any], inventory: Inventory) -> str:
    if obj["kind"] == "TrainJob":
        name = obj["spec"].get("runtimeRef", {}).get("name", "")
        return next((c for c in inventory.classes if runtime_name(c) == name), "")
    selector = obj["spec"].get("template", {}).get("spec", {}).get("nodeSelector", {})
    matching = [c for c, gpu_class in inventory.classes.items()
                if all(selector.get(k) == v for k, v in gpu_class.nodeSelector.items())]
    return matching[0] if len(matching) == 1 else ""


def with_job_defaults(obj: dict[str, Any], inventory: Inventory, case: Case) -> dict[str, Any]:
    """What job-defaults must make of a case's TrainJob or Job, from the inventory's contract: a researcher's new
    job gets the group's default priority class and its class's default walltime when it names none, and a Job
    the finished-job TTL."""
    user = username(case.user, inventory).get("username")
    controllers = controller_identities(inventory)
    group = next((g for g, grp in inventory.groups.items() if case.namespace in grp.namespaces), None)
    if (obj["kind"] not in ("TrainJob", "Job") or case.operation != "CREATE" or group is None
            or user in (controllers.trainer, controllers.jobset, controllers.kueue)):
        return obj
    data = core.job_limits_data(inventory, group)
    job_class = _job_class(obj, inventory)
    walltime_key = f"{job_class}.walltime.default" if f"{job_class}.walltime.default" in data else "walltime.default"
    obj = json.loads(json.dumps(obj))
    labels = obj["metadata"].setdefault("labels", {})
    if data["defaultPriority"]:
        labels.setdefault(kyverno.PRIORITY_LABEL, data["defaultPriority"])
    labels.setdefault(kyverno.WALLTIME_LABEL, data[walltime_key])
    if obj["kind"] == "TrainJob" and job_class:
        # trainjob-processes: Trainer counts only resources named like a GPU; for others, one process per unit.
        resource = accelerators.resource(inventory.classes[job_class])
        trainer_spec = obj["spec"].get("trainer", {})
        per_node = trainer_spec.get("resourcesPerNode", {})
        units = int(per_node.get("requests", {}).get(resource, per_node.get("limits", {}).get(resource, 0)))
        if "gpu" not in resource.lower() and units and "numProcPerNode" not in trainer_spec:
            trainer_spec["numProcPerNode"] = units
    if obj["kind"] == "Job":
        obj["spec"].setdefault("ttlSecondsAfterFinished", seconds(inventory.cluster.queueing.finishedJobTTL))
    return obj


def build_suites(root: Path, inventories: dict[str, Inventory], objects: dict, crds: list[Path],
                 cases: list[Case] = CASES, images: dict[str, str] | None = None) -> dict[str, Suite]:
    """One suite per inventory, user, claims, credentials and operation: the CLI evaluates every resource of a
    suite once per operation its results name, so CREATE and UPDATE cases go to different suites."""
    policies = {name: kyverno.policies(inv) for name, inv in inventories.items()}
    suites: dict[str, Suite] = {}
    for case in cases:
        name = (f"{case.inventory}--{case.user}--{'-'.join(case.claims) or 'no-claims'}"
                f"--{'creds' if case.credentials else 'anonymous'}--{case.operation.lower()}")
        suite = suites.setdefault(name, Suite(name, case.inventory, case.user, case.claims, case.credentials,
                                              case.operation))
        suite.cases.append(case)
    for suite in suites.values():
        directory = root / suite.name
        inventory = inventories[suite.inventory]
        kinds = {}
        for policy in policies[suite.inventory]:
            # The policy exactly as rendered into rendered/kyverno/.
            path = directory / "policies" / f"{policy['metadata']['name']}.yaml"
            path.parent.mkdir(parents=True, exist_ok=True)
            text = emit.manifest(policy, INVENTORIES[suite.inventory].name).decode()
            for placeholder, value in sorted((images or {}).items(), key=lambda item: -len(item[0])):
                text = text.replace(placeholder, value)
            path.write_text(text)
            kinds[policy["metadata"]["name"]] = policy["kind"]
        suite_objects = {case.key: objects[case.key] for case in suite.cases}
        dump(directory / "resources.yaml", *suite_objects.values(), images=images)
        namespace_names = {ns for _, ns, _ in suite_objects}
        namespaces = namespace_objects(namespace_names)
        dump(directory / "values.yaml", {"apiVersion": "cli.kyverno.io/v1alpha1", "kind": "Values",
                                         "metadata": {"name": "values"}, "namespaces": namespaces})
        dump(directory / "user.yaml", {"apiVersion": "cli.kyverno.io/v1alpha1", "kind": "UserInfo",
                                       "metadata": {"name": suite.user},
                                       "userInfo": username(suite.user, inventory)})
        test: dict[str, Any] = {
            "apiVersion": "cli.kyverno.io/v1alpha1", "kind": "Test", "metadata": {"name": suite.name},
            "policies": [f"policies/{name}.yaml" for name in sorted(kinds)],
            "resources": ["resources.yaml"],
            "variables": "values.yaml",
            "userinfo": "user.yaml",
        }
        # With cluster resources the CLI uses its live context provider: real registry lookups, these PVCs.
        dump(directory / "cluster.yaml", {
            "apiVersion": "cli.kyverno.io/v1alpha1", "kind": "ClusterResource", "metadata": {"name": "crds"},
            "spec": {"crds": [str(crd) for crd in crds],
                     "resources": namespaces + claim_objects(inventory, namespace_names, suite.claims)
                     + limits_objects(inventory, namespace_names)}})
        test["clusterResources"] = ["cluster.yaml"]
        results = []
        for case in suite.cases:
            for policy in policies_for(case.kind, case.inventory, case.operation):
                expected = ("error" if case.error else "fail") if policy == case.deny else "pass"
                result: dict[str, Any] = {
                    "policy": policy,
                    "kind": case.kind,
                    "resources": [f"{case.namespace}/{case.name}"],
                    "result": expected,
                    FLAG[kinds[policy]]: True,
                }
                if case.operation != "CREATE":  # CREATE is the CLI's default run
                    result["operation"] = case.operation
                if kinds[policy] == "MutatingPolicy" and not case.outside:
                    # Mutated exactly as expected (after all mutating policies), or not at all.
                    patched = f"patched/{case.index:03d}-{case.name}.yaml"
                    want = (yaml.safe_load((HERE / "patched" / case.mutate).read_text()) if case.mutate
                            else with_job_defaults(objects[case.key], inventory, case))
                    dump(directory / patched, want, images=images)
                    result["patchedResources"] = patched
                results.append(result)
                suite.expected.append((case, policy))
        test["results"] = results
        dump(directory / "kyverno-test.yaml", test)
    return suites


_LOADING = re.compile(r"^Loading test (?P<name>\S*) \( (?P<path>.*) \) \.\.\.$")


def parse_output(stdout: str) -> dict[str, list[dict[str, Any]]]:
    """The JSON rows the CLI prints after each 'Loading test NAME ( PATH ) ...' line, by suite directory."""
    rows: dict[str, list[dict[str, Any]]] = {}
    current, block = None, None
    for line in stdout.splitlines():
        loading = _LOADING.match(line)
        if loading:
            current = Path(loading["path"]).parent.name
        elif line == "[" and current is not None:
            block = [line]
        elif block is not None:
            block.append(line)
            if line == "]":
                assert current not in rows, f"two result tables for {current}"
                rows[current] = json.loads("\n".join(block))
                block = None
    return rows


@dataclass
class Run:
    suites: dict[str, Suite]
    rows: dict[str, list[dict[str, Any]]]
    stdout: str
    returncode: int
    by_case: dict[int, list[tuple[str, dict[str, Any]]]]
    images: dict[str, str]  # placeholder -> value (the registry's address, digests)
    cli_totals: list[int]  # per CLI process, in the order they were started: the results its suites expect


def module_dir(module: str, version: str) -> Path | None:
    try:
        return go_tools.module_dir(module, version)
    except ModuleUnavailable:
        return None


@pytest.fixture(scope="session")
def trainer_crds() -> Path:
    directory = module_dir("github.com/kubeflow/trainer/v2", pin("TRAINER"))
    crds = directory / "manifests" / "base" / "crds" if directory else None
    if crds is None or not all((crds / f"trainer.kubeflow.org_{crd}.yaml").is_file() for crd in TRAINER_CRDS):
        message = f"the Trainer {pin('TRAINER')} CRDs are not in the Go module cache (tools/module-dir.sh)"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run this check: {message}")
        pytest.skip(message + "; run `make tools`")
    return crds


@pytest.fixture(scope="session")
def crds(trainer_crds) -> list[Path]:
    """The Trainer CRDs and JobSet's, from the pinned modules."""
    directory = module_dir("sigs.k8s.io/jobset", pin("JOBSET"))
    jobset = (directory / "config" / "components" / "crd" / "bases" / "jobset.x-k8s.io_jobsets.yaml"
              if directory else None)
    if jobset is None or not jobset.is_file():
        message = f"the JobSet {pin('JOBSET')} CRD is not in the Go module cache (tools/module-dir.sh)"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run this check: {message}")
        pytest.skip(message + "; run `make tools`")
    return [trainer_crds / f"trainer.kubeflow.org_{crd}.yaml" for crd in TRAINER_CRDS] + [jobset]


@pytest.fixture(scope="session")
def inventories() -> dict[str, Inventory]:
    """The inventories, each listing the test registry among its public registries (PUBLIC_REGISTRY)."""
    loaded = {}
    for name, path in INVENTORIES.items():
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        settings = load_inventory(path).cluster.components.kyverno
        kyverno_settings = data["cluster"].setdefault("components", {}).setdefault(
            "kyverno", settings.model_dump(exclude={"publicRegistries"}, exclude_none=True))
        kyverno_settings["publicRegistries"] = with_test_registry(settings)
        loaded[name] = validated(data, str(path))
    return loaded


@pytest.fixture(scope="session")
def case_objects(inventories) -> dict[tuple[str, str, str], dict[str, Any]]:
    """resources/*.yaml plus the TrainJobs the real Kubeflow SDK builds against each inventory's runtimes."""
    objects = resource_objects()
    for case in CASES:
        if case.sdk is None:
            assert case.key in objects, f"case {case.id}: no object {case.key} in tests/policies/resources"
            continue
        sdk = dict(case.sdk)
        runtime = sdk.pop("runtime")
        body = train_job_from_sdk(trainer.runtimes(inventories[case.inventory]), case.namespace, runtime, **sdk)
        body = copy.deepcopy(body)
        body["metadata"]["name"] = case.name  # the SDK picks a random name
        assert case.key not in objects, f"case {case.id}: SDK object clashes with a resource"
        objects[case.key] = body
    return objects


# The CLI runs a directory's suites one after the other on one core: the suites are shared out over this many
# directories, each run by its own CLI process at the same time.
CLI_PROCESSES = 2


def _shares(root: Path, suites: dict[str, Suite], count: int) -> list[Path]:
    """The suites under `root` moved into `count` directories of about equal numbers of results."""
    shares = [root.parent / f"{root.name}-{index}" for index in range(count)]
    loads = [0] * count
    for suite in sorted(suites.values(), key=lambda suite: -len(suite.expected)):
        index = loads.index(min(loads))
        shares[index].mkdir(exist_ok=True)
        (root / suite.name).rename(shares[index] / suite.name)
        loads[index] += len(suite.expected)
    return [share for share in shares if share.is_dir()]


@pytest.fixture(scope="session")
def run(tmp_path_factory, inventories, case_objects, crds, registry) -> Run:
    binary = require_tool(kyverno_path(), f"kyverno CLI {pin('KYVERNO')}", "run `make tools` (tools/build.sh kyverno)")
    suites, rows, stdout, returncode = {}, {}, "", 0
    runs: list[tuple[Path, Path]] = []  # (suites directory, DOCKER_CONFIG)
    for credentials in (False, True):
        root = tmp_path_factory.mktemp("kyverno-suites-creds" if credentials else "kyverno-suites")
        cases = [case for case in CASES if case.credentials == credentials]
        built = build_suites(root, inventories, case_objects, crds, cases, images=registry)
        suites.update(built)
        # The CLI reads registry credentials with go-containerregistry's default keychain (DOCKER_CONFIG).
        docker = tmp_path_factory.mktemp("docker-config")
        if credentials:
            auth = base64.b64encode(f"{REGISTRY_USER}:{REGISTRY_PASSWORD}".encode()).decode()
            (docker / "config.json").write_text(json.dumps({"auths": {
                registry[name]: {"auth": auth} for name in (REGISTRY, LOCALHOST_REGISTRY)}}))
        runs += [(share, docker) for share in _shares(root, built, 1 if credentials else CLI_PROCESSES)]
    processes: list[tuple[subprocess.Popen, Path]] = []
    try:
        for share, docker in runs:
            # To files, not pipes: a process whose pipe is not being read would stall.
            output = share.parent / f"{share.name}.out"
            with open(output, "w") as out, open(f"{output}.err", "w") as err:
                processes.append((subprocess.Popen(
                    [binary, "test", str(share), "--output-format", "json", "--detailed-results", "--remove-color"],
                    stdout=out, stderr=err, text=True,
                    env={**os.environ, "DOCKER_CONFIG": str(docker), **HTTP_BLOCKLIST}), output))
        for process, output in processes:
            process.wait(timeout=ceiling(90))
            out = output.read_text()
            stdout += out + Path(f"{output}.err").read_text()
            rows.update(parse_output(out))
            returncode = returncode or process.returncode
    finally:
        for process, _ in processes:  # a timeout or an interrupt: stop the rest by their ids
            if process.poll() is None:
                process.kill()
                process.wait()
    by_case: dict[int, list[tuple[str, dict[str, Any]]]] = defaultdict(list)
    for name, suite in suites.items():
        got = rows.get(name, [])
        assert len(got) == len(suite.expected), (
            f"suite {name}: {len(suite.expected)} results expected, the CLI reported {len(got)}\n{stdout[-5000:]}")
        for (case, policy), row in zip(suite.expected, got):
            by_case[case.index].append((policy, row))
    cli_totals = [sum(len(suites[suite.name].expected) for suite in share.iterdir() if suite.is_dir())
                  for share, _ in runs]
    return Run(suites, rows, stdout, returncode, by_case, registry, cli_totals)


# --- the checks -------------------------------------------------------------------------------------------

@pytest.mark.tools
def test_every_suite_ran_and_the_cli_reports_no_failure(run):
    assert set(run.rows) == set(run.suites), run.stdout[-5000:]
    failed = [(suite, row) for suite, rows in run.rows.items() for row in rows if row["RESULT"] != "Pass"]
    assert not failed, "\n".join(f"{suite}: {row}" for suite, row in failed)
    # CLI_PROCESSES runs without registry credentials, one with; together every suite's results.
    assert len(run.cli_totals) == CLI_PROCESSES + 1
    assert sum(run.cli_totals) == sum(len(suite.expected) for suite in run.suites.values())
    summary = [line for line in run.stdout.splitlines() if line.startswith("Test Summary")]
    assert summary == [f"Test Summary: {total} tests passed and 0 tests failed" for total in run.cli_totals], (
        summary, run.stdout[-3000:])
    assert run.returncode == 0, run.stdout[-5000:]


@pytest.mark.tools
@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_case(run, case):
    rows = run.by_case[case.index]
    assert [policy for policy, _ in rows] == list(policies_for(case.kind, case.inventory, case.operation))
    resource = f"{API_VERSIONS[case.kind]}/{case.kind}/{case.namespace}/{case.name}"
    for policy, row in rows:
        where = f"{policy} on {resource} ({case.operation} as {case.user}): {row}"
        assert row["POLICY"] == policy and row["RESOURCE"] == resource, where
        # The CLI's verdict on the expected result: "Pass" means it matched.
        assert row["RESULT"] == "Pass", where
        if case.outside:
            assert row["REASON"] == "Excluded", where
            continue
        # Anything else must have been evaluated: an excluded policy would "pass" any expectation.
        assert row["REASON"] == "Ok", where
        if policy == case.deny:
            message = case.message
            for placeholder, value in sorted(run.images.items(), key=lambda item: -len(item[0])):
                message = message.replace(placeholder, value)
            assert message in row["Message"], where
        else:
            assert row["Message"] == "success", where


def test_enough_bypass_attempts_and_legitimate_objects():
    denied = [case for case in CASES + UPDATES if case.deny]
    legitimate = [case for case in CASES + UPDATES if case.legitimate]
    assert len(denied) >= 60, len(denied)
    assert len(legitimate) >= 25, len(legitimate)
    # Every policy is shown to deny (or mutate) and to let legitimate objects through.
    for policy in (kyverno.CLAIMS, kyverno.RUNTIME, kyverno.PLACEMENT, kyverno.QUEUE, kyverno.OWNERSHIP,
                   kyverno.GPU_PODS, kyverno.GPU_VISIBILITY, kyverno.IMAGE_ARCH):
        assert any(case.deny == policy and not case.error for case in CASES), policy
    assert any(case.mutate for case in CASES)
    # Legitimate objects of every kind: plain Jobs, notebook-like Pods, CPU-only jobs, registry images.
    assert {case.kind for case in legitimate} >= {"TrainJob", "Job", "Pod", "JobSet"}
    assert sum(1 for case in legitimate if "REGISTRY" in json.dumps(case_resources().get(case.key, {}))) >= 4
    # Placement: each field, on CREATE and on UPDATE.
    for fieldname in kyverno.PLACEMENT_FIELDS:
        ops = {case.operation for case in denied if f"remove {fieldname} from spec.runtimePatches" in case.message}
        assert ops >= {"CREATE", "UPDATE"}, (fieldname, ops)
    # Legitimate inputs include SDK-made TrainJobs and a plain batch Job requesting one GPU.
    assert sum(1 for case in legitimate if case.sdk) >= 3
    assert any(case.kind == "Job" and case.name == "one-gpu" and case.allow for case in CASES)


def test_sdk_trainjobs_are_what_the_sdk_builds(case_objects):
    """The SDK cases are built at test time (nothing generated is committed), and look like the SDK's."""
    body = case_objects[("TrainJob", "vision-lab", "sdk-two-nodes")]
    assert body["spec"]["runtimeRef"] == {"kind": "ClusterTrainingRuntime", "name": "torch-gh200"}
    assert body["spec"]["trainer"]["numNodes"] == 2
    assert body["spec"]["trainer"]["resourcesPerNode"]["limits"]["nvidia.com/gpu"] in (1, "1")
    assert case_objects[("TrainJob", "vision-lab", "sdk-multi-arch-image")]["spec"]["trainer"]["image"] == \
        "REGISTRY/vision/train:multi"


@pytest.mark.tools
def test_harness_catches_a_wrong_expectation(tmp_path, run, inventories, case_objects, crds, registry):
    """An expectation the policies do not meet must fail in the CLI: the harness cannot pass vacuously."""
    (case,) = [c for c in CASES if c.key == ("TrainJob", "vision-lab", "torch-distributed") and c.inventory == "flame"]
    (suite,) = build_suites(tmp_path, inventories, case_objects, crds, [case], images=registry).values()
    test_file = tmp_path / suite.name / "kyverno-test.yaml"
    test = yaml.safe_load(test_file.read_text())
    (result,) = [r for r in test["results"] if r["policy"] == kyverno.RUNTIME]
    result["result"] = "pass"  # torch-distributed is denied: expecting a pass must fail
    dump(test_file, test)
    done = subprocess.run([str(kyverno_path()), "test", str(tmp_path / suite.name), "--remove-color"],
                          capture_output=True, text=True, timeout=ceiling(30))
    assert done.returncode != 0
    assert "Want pass, got fail" in done.stdout
    assert f"Test Summary: {len(policies_for('TrainJob', 'flame')) - 1} tests passed and 1 tests failed" in done.stdout


# --- UPDATEs with a real oldObject, through Kyverno's CEL engine ----------------------------------------------

def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


@pytest.fixture(scope="session")
def engine(tmp_path_factory) -> Path:
    return kyverno_engine(tmp_path_factory)


@pytest.fixture(scope="session")
def update_responses(engine, tmp_path_factory, inventories, case_objects) -> dict[int, list[dict[str, Any]]]:
    by_inventory: dict[str, list[Case]] = defaultdict(list)
    for case in UPDATES:
        by_inventory[case.inventory].append(case)
    responses: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for name, cases in by_inventory.items():
        inventory = inventories[name]
        directory = tmp_path_factory.mktemp(f"engine-{name}")
        files = []
        for policy in kyverno.policies(inventory):
            if policy["kind"] == "ValidatingPolicy":
                path = directory / f"{policy['metadata']['name']}.yaml"
                path.write_bytes(emit.manifest(policy, INVENTORIES[name].name))
                files.append(str(path))
        requests = []
        for case in cases:
            old = case_objects[case.key]
            requests.append({
                "id": str(case.index), "operation": "UPDATE", "subResource": case.subresource or "",
                "username": username(case.user, inventory)["username"],
                "object": merge_patch(old, case.patch), "oldObject": old,
                "namespaces": kyverno.research_namespaces(inventory),
            })
        done = subprocess.run([str(engine), *files], input=json.dumps(requests), capture_output=True, text=True,
                              timeout=ceiling(30))
        assert done.returncode == 0, done.stderr
        for response in json.loads(done.stdout):
            responses[int(response["id"])].append(response)
    return responses


@pytest.mark.tools
@pytest.mark.parametrize("case", UPDATES, ids=[case.id for case in UPDATES])
def test_update(update_responses, case):
    # The ValidatingPolicies that take the UPDATE (of a Pod, only that of its ephemeral containers).
    expected = list(policies_for(case.kind, case.inventory, "UPDATE", case.subresource, mutating=False))
    got = update_responses[case.index]
    assert [r["policy"] for r in got] == expected, got
    for response in got:
        if response["policy"] == case.deny:
            assert response["status"] == "fail" and case.message in response["message"], response
        else:
            assert response["status"] == "pass" and response["message"] == "success", response


def test_merge_patch_is_rfc_7386():
    assert merge_patch({"a": {"b": 1, "c": 2}, "l": [1]}, {"a": {"b": None, "d": 3}, "l": [2]}) == \
        {"a": {"c": 2, "d": 3}, "l": [2]}


# Objects that use fields the Trainer v2.3 CRD does not have: the API server never lets them reach admission,
# and the policies refuse them anyway (for other Trainer versions).
OUTSIDE_TRAINER_SCHEMA = sorted([
    ("TrainJob", "image-in-runtime-patch"),
    ("TrainJob", "legacy-pod-spec-overrides"),
    ("TrainJob", "legacy-pod-template-overrides"),
    ("TrainJob", "patch-node-name"),
])


@pytest.mark.tools
def test_test_objects_are_real_objects():
    """The test objects are what the API server accepts (strict schemas from the pinned sources), so the bypass
    attempts could be sent for real; only OUTSIDE_TRAINER_SCHEMA cannot."""
    require_tool(cache_dir() / "bin" / f"kubeconform-{pin('KUBECONFORM')}", "kubeconform", "run `make tools`")
    done = subprocess.run(["bash", "tools/kubeconform.sh", "tests/policies/resources", "tests/policies/patched"],
                          cwd=REPO, capture_output=True, text=True, timeout=ceiling(60))
    invalid = sorted(re.findall(r" - (\w+) (\S+) is invalid", done.stdout))
    assert invalid == OUTSIDE_TRAINER_SCHEMA, done.stdout + done.stderr
    assert re.search(r"Errors: 0, Skipped: 0", done.stdout), done.stdout + done.stderr


# --- the policies follow the inventory, at any scale --------------------------------------------------------

def by_name(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {obj["metadata"]["name"]: obj for obj in objects}


def cel_text(policy: dict[str, Any]) -> str:
    spec = policy["spec"]
    parts = [v["expression"] for v in spec.get("variables", [])]
    for validation in spec.get("validations", []):
        parts += [validation["expression"], validation.get("messageExpression", ""), validation.get("message", "")]
    for mutation in spec.get("mutations", []):
        parts.append(mutation["jsonPatch"]["expression"])
    return "\n".join(parts)


def test_policies_follow_the_inventory(inventories):
    flame, lab = (by_name(kyverno.policies(inventories[name])) for name in ("flame", "two-classes"))
    assert 'variables.ref.name in ["torch-gh200"]' in cel_text(flame[kyverno.RUNTIME])
    assert 'variables.ref.name in ["torch-a100", "torch-gh200"]' in cel_text(lab[kyverno.RUNTIME])
    assert '{"torch-gh200": "arm64"}' in cel_text(flame[kyverno.IMAGE_ARCH])
    assert '{"torch-a100": "amd64", "torch-gh200": "arm64"}' in cel_text(lab[kyverno.IMAGE_ARCH])
    assert '"claim": "user-home", "path": "/personal"' in cel_text(lab[kyverno.MOUNT_STORAGE])
    assert '"claim": "group-scratch", "path": "/scratch"' in cel_text(lab[kyverno.MOUNT_STORAGE])
    assert '"system:kube-controller-manager"' in cel_text(lab[kyverno.GPU_PODS])
    assert '"system:serviceaccount:kueue:kueue-controller"' in cel_text(lab[kyverno.PLACEMENT])
    for policies, namespaces in ((flame, ["nlp-lab", "nlp-lab-teaching", "vision-lab"]),
                                 (lab, ["robotics", "robotics-dev"])):
        for policy in policies.values():
            (expression,) = policy["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"]
            assert expression == {"key": "kubernetes.io/metadata.name", "operator": "In", "values": namespaces}


def test_every_policy_is_in_the_guardrails_page(inventories):
    """docs/policies.md's table of policies has a row for each policy any corpus inventory renders."""
    page = (REPO / "docs" / "policies.md").read_text(encoding="utf-8")
    names = {p["metadata"]["name"] for inventory in inventories.values() for p in kyverno.policies(inventory)}
    missing = sorted(name for name in names if f"\n| `{name}` |" not in page)
    assert not missing, f"docs/policies.md's table of policies has no row for {missing}"


def test_every_policy_enforces(inventories):
    for policy in kyverno.policies(inventories["flame"]):
        spec = policy["spec"]
        assert policy["apiVersion"] == "policies.kyverno.io/v1"
        if policy["kind"] == "DeletingPolicy":  # not an admission policy: the cleanup controller runs it
            assert policy["metadata"]["name"] == kyverno.FINISHED_TRAINJOBS
            continue
        assert spec["failurePolicy"] == "Fail"
        assert "matchConditions" not in spec  # one shared webhook (see the module docstring)
        if policy["kind"] == "ValidatingPolicy":
            assert spec["validationActions"] == ["Deny"]


@pytest.mark.parametrize("ttl, schedule", [
    ("1s", "* * * * *"), ("10m", "* * * * *"), ("20m", "*/2 * * * *"), ("1h", "*/6 * * * *"),
    ("90m", "*/6 * * * *"), ("2h", "*/12 * * * *"), ("5h", "*/30 * * * *"), ("10h", "0 * * * *"),
    ("7d", "0 * * * *"),
])
def test_finished_trainjobs_are_looked_at_every_tenth_of_the_ttl(ttl, schedule):
    """Within a tenth of the TTL after it (a divisor of an hour, at least a minute, at most an hour)."""
    policy = kyverno.finished_trainjobs(variant(lambda d: d["cluster"]["queueing"].__setitem__("finishedJobTTL", ttl)))
    assert policy["spec"]["schedule"] == schedule
    assert f'duration("{seconds(ttl)}s")' in policy["spec"]["conditions"][0]["expression"]


def big_inventory(classes: int, groups: int, namespaces_per_group: int) -> Inventory:
    allocation = {"gpus": 0, "cpu": 0, "memory": "0"}

    def scale(data: dict) -> None:
        template = data["classes"]["gh200"]
        data["classes"] = {f"c{i:02d}": {**template, "arch": "arm64" if i % 2 else "amd64",
                                         "nodeSelector": {"nvidia.com/gpu.product": f"GPU-{i:02d}"}}
                           for i in range(classes)}
        data["groups"] = {f"group-{g:04d}": {"namespaces": [f"group-{g:04d}-{n}" for n in range(namespaces_per_group)],
                                             "allocations": {"c00": allocation}} for g in range(groups)}
    return variant(scale)


def test_policy_size_and_cel_do_not_grow_with_namespaces():
    """64 classes x 2,000 groups x 3 namespaces: six policies whatever the count; the namespace list lives in
    the selector only (stored once per policy), never in CEL; each object stays far below etcd's 1.5 MiB."""
    small, large = big_inventory(64, 2, 3), big_inventory(64, 2000, 3)
    small_policies, large_policies = kyverno.policies(small), kyverno.policies(large)
    assert [p["metadata"]["name"] for p in small_policies] == [p["metadata"]["name"] for p in large_policies]
    for few, many in zip(small_policies, large_policies):
        assert cel_text(few) == cel_text(many)
        size = len(json.dumps(many))
        assert size < 300 * 1024, (many["metadata"]["name"], size)
        values = many["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"][0]["values"]
        assert len(values) == 6000 and values == sorted(values)
    # Identical selectors: Kyverno groups the policies into one webhook per failure policy.
    selectors = {json.dumps(p["spec"]["matchConstraints"]["namespaceSelector"]) for p in large_policies}
    assert len(selectors) == 1


def test_render_is_deterministic(inventories):
    for inventory in inventories.values():
        first = [emit.to_yaml(p) for p in kyverno.policies(inventory)]
        assert first == [emit.to_yaml(p) for p in kyverno.policies(inventory)]


@pytest.mark.tools
def test_unquoted_quantities_are_no_cel_error(tmp_path, inventories):
    """`kyverno apply` on a manifest with unquoted quantities: every rule judges (pass or fail), none errors."""
    binary = require_tool(kyverno_path(), f"kyverno CLI {pin('KYVERNO')}", "run `make tools` (tools/build.sh kyverno)")
    inventory = inventories["flame"]
    policies = tmp_path / "policies"
    policies.mkdir()
    for policy in kyverno.policies(inventory):
        if "pods" in json.dumps(policy["spec"]["matchConstraints"]["resourceRules"]):
            (policies / f"{policy['metadata']['name']}.yaml").write_bytes(emit.manifest(policy, "gpu_classes.yaml"))
    dump(tmp_path / "user.yaml", {"apiVersion": "cli.kyverno.io/v1alpha1", "kind": "UserInfo",
                                  "metadata": {"name": "researcher"}, "userInfo": username("researcher", inventory)})
    dump(tmp_path / "values.yaml", {"apiVersion": "cli.kyverno.io/v1alpha1", "kind": "Values",
                                    "metadata": {"name": "values"}, "namespaces": namespace_objects({"vision-lab"})})
    done = subprocess.run([binary, "apply", str(policies), "--resource", str(HERE / "unquoted-quantities.yaml"),
                           "--userinfo", str(tmp_path / "user.yaml"), "--values-file", str(tmp_path / "values.yaml"),
                           "--remove-color"], capture_output=True, text=True, timeout=ceiling(30))
    output = done.stdout + done.stderr
    # Both pods request GPUs as a researcher (gpu-pods-from-jobs fails twice); the second says void beside a GPU
    # request (gpu-visibility fails); the rest pass, the two mutations included.
    assert re.search(r"pass: \d+, fail: 3, warn: 0, error: 0, skip: 0", output), output[-3000:]
    assert output.count("policy gpu-pods-from-jobs -> resource vision-lab/Pod/unquoted-gpu") == 2, output[-3000:]
    assert "policy gpu-visibility -> resource vision-lab/Pod/unquoted-gpu-void failed" in output, output[-3000:]


# --- every CEL expression parses with cel-go's parser ------------------------------------------------------

@pytest.mark.tools
def test_every_cel_expression_parses(tmp_path_factory, inventories):
    import shutil

    if shutil.which("go") is None:
        message = "needs the Go toolchain"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run this check: {message}")
        pytest.skip(message)
    binary = go_program(CELPARSE_SOURCE, "gpugen.local/celparse", [f"github.com/google/cel-go@{cel_go_version()}"],
                        tmp_path_factory)
    found = {f"{name}:{where}": text for name, inventory in inventories.items()
             for policy in kyverno.policies(inventory) for where, text in expressions(policy).items()}
    assert len(found) > 50, len(found)
    # Two that must not parse, so the check can fail.
    broken = {"broken:unbalanced": "variables.images.filter(i, i != \"\"", "broken:operator": "object.spec +"}
    done = subprocess.run([str(binary)], input=json.dumps([{"id": k, "expression": v} for k, v in
                                                          {**found, **broken}.items()]),
                          capture_output=True, text=True, timeout=ceiling(12))
    assert done.returncode == 0, done.stderr
    failures = {f["id"]: f["error"] for f in json.loads(done.stdout)}
    assert set(failures) == set(broken), failures


def test_templates_need_exactly_their_parameters():
    """A placeholder without a parameter, or a parameter no placeholder uses, fails the render."""
    assert cel_templates.fill("a: |-\n  $x == $y\n", x="s", y=["t"]) == {"a": '"s" == ["t"]'}
    with pytest.raises(ValueError, match="placeholders"):
        cel_templates.fill("a: |-\n  $x\n")
    with pytest.raises(ValueError, match="placeholders"):
        cel_templates.fill("a: |-\n  $x\n", x="s", unused=1)


def test_fragments_take_their_argument_then_expand_the_fragments_they_call():
    """A fragment's parameter is replaced in its own text only: a word of a fragment it calls that happens to be
    the caller's parameter stays. Continuation lines are indented like the line of the call."""
    fragments = {"outer": ("job", "job.spec\n  + @inner(job.status)"), "inner": ("patch", "[patch.job]")}
    assert cel_templates.expand("x: |-\n    @outer(object)", fragments) == \
        "x: |-\n    object.spec\n      + [object.status.job]"
    with pytest.raises(ValueError, match="unknown CEL fragment @missing"):
        cel_templates.expand("@missing(object)", fragments)


def test_several_shares_per_container_follow_the_class_s_time_slicing(inventories):
    """A time-sliced class refuses more than one share per container unless its timeSlicing says the device plugin
    lets them through (failRequestsGreaterThanOne: false); no other class ever does."""
    def shares_rule(inventory: Inventory) -> str:
        (one_share,) = [v["expression"] for v in kyverno.job_limits(inventory)["spec"]["variables"]
                        if v["name"] == "oneShare"]
        return one_share

    assert '{"l40s-shared": "nvidia.com/gpu.shared"}' in shares_rule(inventories["mixed"])
    assert 'in ["nvidia.com/gpu.shared"]' in shares_rule(inventories["mixed"])
    data = yaml.safe_load(INVENTORIES["mixed"].read_text(encoding="utf-8"))
    data["classes"]["l40s-shared"]["accelerator"]["timeSlicing"]["failRequestsGreaterThanOne"] = False
    assert "{}" in shares_rule(validated(data, str(INVENTORIES["mixed"])))
    assert not any(v["name"] == "oneShare" for v in kyverno.job_limits(inventories["flame"])["spec"]["variables"])
