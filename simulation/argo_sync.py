"""Argo CD's sync of one Application, modelled on gitops-engine (the pinned Argo CD's gitops-engine/pkg/sync), applied
to a real API server. The real Argo CD runs in the simulated FLAME (argocd_local.py); this model stays for the
tiers that have no Argo CD (the Kueue e2e tier, researchers' access), where a sync takes a second instead of a
controller's reconciliation loop. Its task order is checked against the real controller's on the same changes
(tests/flame: `task_list` against `ArgoCD.sync_tasks`). What is modelled, with the source it follows:

- Tasks (sync_context.go getSyncTasks): one apply task per desired object, one prune task per live object the
  Application tracks that is no longer desired. Tracking is Argo CD v3's default annotation
  `argocd.argoproj.io/tracking-id: APP:GROUP/KIND:NAMESPACE/NAME`, written into each object on apply, with the
  destination namespace for an object that has none (cluster-scoped ones included); a live object is the
  Application's when the id names it and the object itself (`tracked_by`).
- Order (sync_tasks.go Less, Sort): by sync wave, then Helm's kind order (Namespace ... APIService; kinds not in
  the list, custom resources included, after them), then name; namespaces and CRDs are moved before the objects
  that need them.
- Prune waves (sync_context.go around "for prune tasks, modify the waves"): the waves of prune tasks are reversed
  among themselves (a symmetric swap over their distinct waves); with PruneLast (app-level sync option or the
  object's `argocd.argoproj.io/sync-options: PruneLast=true`) a prune task gets the wave after the last one.
- One step per Sync() call (sync_context.go Sync): if any applied task of the previous step is still running (a
  multi-wave sync waits for health), wait; if a pruned object is still there with a deletionTimestamp, WAIT — it
  never fails, so a finalizer that is never released keeps the sync Running forever; otherwise run the next
  wave: prunes first (a pruned task is complete at once; an object already being deleted is not deleted again),
  then applies (server-side apply); the sync fails if an apply is refused. When the wave just run was the last
  one, the sync has Succeeded at once, even if objects it pruned are still terminating.
- Health (gitops-engine pkg/health and argo-cd resource_customizations): Deployment, APIService, CRD, Job, Pod and
  Service have health; an Application has health only when argocd-cm enables it; every other kind has none and
  succeeds once applied.
- Prune propagation: Argo CD's default is foreground. A control plane without the garbage collector
  (kube-controller-manager) never completes a foreground deletion, so such a caller passes "Background".

    result = ArgoSync(api, "flame-training-platform", prune_last=True).sync(objects, usual=12)
    assert result.phase == "Succeeded", result.message
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any
from collections.abc import Callable

from simulation import waiting as waiting_module

TRACKING = "argocd.argoproj.io/tracking-id"
SYNC_WAVE = "argocd.argoproj.io/sync-wave"
SYNC_OPTIONS = "argocd.argoproj.io/sync-options"

# gitops-engine sync_tasks.go kindOrder (from Helm's kind_sorter); kinds not listed sort after all of these.
KIND_ORDER = ["Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy",
              "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList", "ConfigMap", "StorageClass",
              "PersistentVolume", "PersistentVolumeClaim", "CustomResourceDefinition", "ClusterRole",
              "ClusterRoleList", "ClusterRoleBinding", "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding",
              "RoleBindingList", "Service", "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
              "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress", "APIService"]
_KIND_RANK = {kind: i - len(KIND_ORDER) for i, kind in enumerate(KIND_ORDER)}


def group_of(obj: dict) -> str:
    return obj["apiVersion"].rpartition("/")[0]


def ident(obj: dict) -> tuple[str, str, str, str]:
    meta = obj["metadata"]
    return group_of(obj), obj["kind"], meta.get("namespace", ""), meta["name"]


def tracking_id(app: str, obj: dict, destination_namespace: str = "") -> str:
    """util/argo/resource_tracking.go: an object without a namespace (cluster-scoped ones too) is tracked under the
    Application's destination namespace."""
    group, kind, namespace, name = ident(obj)
    return f"{app}:{group}/{kind}:{namespace or destination_namespace}/{name}"


def tracked_by(app: str, obj: dict) -> bool:
    """The live object belongs to `app` (controller/state.go isSelfReferencedObj): its tracking id names the app
    and the object itself, its namespace compared only for a namespaced object (a copied annotation does not
    count)."""
    value = obj["metadata"].get("annotations", {}).get(TRACKING, "")
    owner, _, rest = value.partition(":")
    group_kind, _, namespace_name = rest.partition(":")
    group, _, kind = group_kind.partition("/")
    namespace, _, name = namespace_name.partition("/")
    obj_group, obj_kind, obj_namespace, obj_name = ident(obj)
    return (owner == app and (group, kind, name) == (obj_group, obj_kind, obj_name)
            and obj_namespace in ("", namespace))


def wave_of(obj: dict) -> int:
    return int(obj["metadata"].get("annotations", {}).get(SYNC_WAVE, "0"))


def has_option(obj: dict, option: str) -> bool:
    raw = obj["metadata"].get("annotations", {}).get(SYNC_OPTIONS, "")
    return option in {o.strip() for o in raw.split(",")}


# ------------------------------------------------------------------ health (None: the kind has no health check)

def _condition(obj, type_):
    return next((c for c in obj.get("status", {}).get("conditions", []) if c.get("type") == type_), None)


def health(obj: dict, application_health: bool = False) -> str | None:
    kind, status = obj["kind"], obj.get("status") or {}
    if kind == "CustomResourceDefinition":  # resource_customizations/apiextensions.k8s.io/CustomResourceDefinition
        if obj["metadata"].get("deletionTimestamp"):
            return "Progressing"
        established, names = _condition(obj, "Established"), _condition(obj, "NamesAccepted")
        if names and names.get("status") == "False":
            return "Degraded"
        return "Healthy" if established and established.get("status") == "True" else "Progressing"
    if kind == "Deployment":  # pkg/health/health_deployment.go (rollout complete)
        spec_replicas = obj["spec"].get("replicas", 1)
        if status.get("observedGeneration", 0) < obj["metadata"].get("generation", 0):
            return "Progressing"
        if status.get("updatedReplicas", 0) < spec_replicas or status.get("availableReplicas", 0) < spec_replicas:
            return "Progressing"
        return "Healthy"
    if kind == "APIService":  # pkg/health/health_apiservice.go
        available = _condition(obj, "Available")
        return "Healthy" if available and available.get("status") == "True" else "Progressing"
    if kind == "Job":  # pkg/health/health_job.go
        if _condition(obj, "Failed") and _condition(obj, "Failed").get("status") == "True":
            return "Degraded"
        complete = _condition(obj, "Complete")
        return "Healthy" if complete and complete.get("status") == "True" else "Progressing"
    if kind == "Pod":  # pkg/health/health_pod.go (simplified: phase)
        return {"Succeeded": "Healthy", "Running": "Healthy", "Failed": "Degraded"}.get(status.get("phase"),
                                                                                         "Progressing")
    if kind == "Application" and group_of(obj) == "argoproj.io":
        if not application_health:
            return None  # Argo CD >= 1.8 does not assess child Applications unless argocd-cm says so
        return (status.get("health") or {}).get("status", "Progressing")
    return None


# ------------------------------------------------------------------ the sync

@dataclasses.dataclass
class Task:
    target: dict | None  # desired object (apply) or None (prune)
    live: dict | None
    wave: int
    state: str = "pending"  # pending -> running -> successful | failed; prune: pending -> pruned
    message: str = ""

    @property
    def obj(self) -> dict:
        return self.target if self.target is not None else self.live

    @property
    def is_prune(self) -> bool:
        return self.target is None

    def sort_key(self):
        return self.wave, _KIND_RANK.get(self.obj["kind"], 0), self.obj["metadata"]["name"]


@dataclasses.dataclass
class SyncResult:
    phase: str  # Succeeded | Failed | Running (timed out while waiting)
    message: str
    steps: list[str]
    waiting_on: list[str]  # Running: what it waits for; Succeeded: pruned objects still terminating


class ArgoSync:
    """One Application's syncs against `api` (get(api_version, kind, name, ns) -> dict | None, apply(obj) ->
    response with .ok, delete(api_version, kind, name, ns, propagation) -> response, list(api_version, kind) ->
    list of dicts)."""

    def __init__(self, api, app: str, prune_last: bool = False, propagation: str = "Foreground",
                 application_health: bool = False, interval: float = 0.5, destination_namespace: str = ""):
        self.api, self.app, self.prune_last = api, app, prune_last
        self.destination_namespace = destination_namespace
        self.propagation, self.application_health, self.interval = propagation, application_health, interval
        self.kinds: set[tuple[str, str]] = set()  # (apiVersion, kind) this Application has ever applied

    def live_objects(self) -> dict[tuple, dict]:
        live = {}
        for api_version, kind in sorted(self.kinds):
            for obj in self.api.list(api_version, kind):
                obj = {"apiVersion": api_version, "kind": kind, **obj}  # list items carry neither
                if tracked_by(self.app, obj):
                    live[ident(obj)] = obj
        return live

    def plan(self, desired: list[dict]) -> list[Task]:
        live = self.live_objects()
        wanted = {ident(o): o for o in desired}
        tasks = [Task(o, live.get(k), wave_of(o)) for k, o in wanted.items()]
        tasks += [Task(None, o, wave_of(o)) for k, o in live.items() if k not in wanted]
        prunes = [t for t in tasks if t.is_prune]
        waves = sorted({t.wave for t in prunes})
        swapped = {w: waves[len(waves) - 1 - i] for i, w in enumerate(waves)}
        for t in prunes:
            t.wave = swapped[t.wave]
        last = max([0, *(t.wave for t in tasks)]) + 1  # syncPhaseLastWave starts at 0
        for t in prunes:
            if self.prune_last or has_option(t.live, "PruneLast=true"):
                t.wave = last
        tasks.sort(key=Task.sort_key)
        # Namespaces and CRDs before what needs them (sync_tasks.go adjustDeps): here they already sort first
        # within a wave; a dependent in an earlier wave pulls them forward.
        for dep_kind, needs in (("Namespace", lambda o, d: o["metadata"].get("namespace") == d["metadata"]["name"]),
                                ("CustomResourceDefinition",
                                 lambda o, d: (group_of(o), o["kind"]) == (d["spec"]["group"],
                                                                           d["spec"]["names"]["kind"]))):
            for dep in [t for t in tasks if t.target is not None and t.target["kind"] == dep_kind]:
                users = [t for t in tasks if t.target is not None and t is not dep and needs(t.target, dep.target)]
                if users:
                    dep.wave = min(dep.wave, min(u.wave for u in users))
        tasks.sort(key=Task.sort_key)
        return tasks

    def _refresh(self, task: Task) -> dict | None:
        o = task.obj
        return self.api.get(o["apiVersion"], o["kind"], o["metadata"]["name"], o["metadata"].get("namespace"))

    def _tracked(self, desired: list[dict]) -> list[dict]:
        tracked = []
        for o in desired:
            o = {**o, "metadata": {**o["metadata"], "annotations": {**o["metadata"].get("annotations", {}),
                                                                     TRACKING: tracking_id(
                                                                         self.app, o, self.destination_namespace)}}}
            tracked.append(o)
            self.kinds.add((o["apiVersion"], o["kind"]))
        return tracked

    def task_list(self, desired: list[dict]) -> list[tuple[str, int, str, str, str, str, str]]:
        """The tasks a sync of `desired` would run, in this model's order, as (phase, wave, action, group, kind,
        namespace, name) with action "apply" or "prune": what the real controller logs, sorted, as its
        "Tasks (dry-run)" when an operation starts (argocd_local.ArgoCD.sync_tasks), so the two can be compared."""
        return [("Sync", t.wave, "prune" if t.is_prune else "apply", *ident(t.obj))
                for t in self.plan(self._tracked(desired))]

    def sync(self, desired: list[dict], usual: float = 12, on_step: Callable[[str], Any] | None = None,
             stall: float | None = None) -> SyncResult:
        """Run the sync to its end. While it waits on health or on pruned objects, it gives up (phase Running,
        naming what it waits on) when none of those changed for `stall` seconds (default waiting.STALL) or at
        ceiling(usual): a sync that usually takes `usual` seconds (simulation/waiting.py)."""
        tasks = self.plan(self._tracked(desired))
        self.last_tasks = tasks
        multi_step = len({t.wave for t in tasks}) > 1
        steps: list[str] = []
        started = moved = time.monotonic()
        stall = waiting_module.STALL if stall is None else stall
        seen = None

        def log(line):
            steps.append(line)
            if on_step:
                on_step(line)

        while True:  # one iteration = one Sync() call of the controller
            for t in [t for t in tasks if t.state == "running"]:
                live = self._refresh(t)
                status = health(live, self.application_health) if live else "Missing"
                if status in (None, "Healthy"):
                    t.state = "successful"
                elif status == "Degraded":
                    t.state, t.message = "failed", f"{t.obj['kind']} {t.obj['metadata']['name']} is Degraded"
            for t in [t for t in tasks if t.state == "pruned"]:
                t.live = self._refresh(t)
            waiting = [t for t in tasks if t.state == "running" and multi_step]
            # "if pruned tasks pending deletion, then wait..." (reached only when nothing else runs)
            pending_deletion = [t for t in tasks if t.state == "pruned" and t.live is not None
                                and t.live["metadata"].get("deletionTimestamp")]
            if failed := [t for t in tasks if t.state == "failed"]:
                return SyncResult("Failed", "; ".join(t.message for t in failed), steps, [])
            if waiting or pending_deletion:
                names = [f"{t.obj['kind']}/{t.obj['metadata']['name']} (waiting for health)" for t in waiting]
                names += [f"{t.obj['kind']}/{t.obj['metadata']['name']} (pending deletion, finalizers: "
                          f"{','.join(t.live['metadata'].get('finalizers', []))})" for t in pending_deletion]
                now = time.monotonic()
                if names != seen:
                    seen, moved = names, now
                if now - moved > stall:
                    return SyncResult("Running", f"nothing moved for {now - moved:.0f}s", steps, names)
                if now - started > waiting_module.ceiling(usual):
                    return SyncResult("Running", f"still waiting at the ceiling, {now - started:.0f}s", steps, names)
                time.sleep(self.interval)
                continue
            pending = [t for t in tasks if t.state == "pending"]
            if not pending:
                return SyncResult("Succeeded", "successfully synced (no more tasks)", steps, [])
            wave = pending[0].wave
            batch = [t for t in pending if t.wave == wave]
            for t in [t for t in batch if t.is_prune]:  # prune first
                o = t.live
                t.state = "pruned"
                if has_option(o, "Prune=false"):
                    t.live = None  # ResultCodePruneSkipped: nothing to wait for
                    log(f"wave {wave}: prune skipped (Prune=false) {o['kind']}/{o['metadata']['name']}")
                    continue
                if not o["metadata"].get("deletionTimestamp"):  # already deleting: not deleted again
                    self.api.delete(o["apiVersion"], o["kind"], o["metadata"]["name"],
                                    o["metadata"].get("namespace"), propagation=self.propagation)
                log(f"wave {wave}: prune {o['kind']}/{o['metadata']['name']}")
            for t in [t for t in batch if not t.is_prune]:
                r = self.api.apply(t.target)
                if not r.ok:
                    t.state = "failed"
                    t.message = f"{t.target['kind']} {t.target['metadata']['name']}: {r.status_code} {r.text[:500]}"
                    continue
                t.state = "running"
                log(f"wave {wave}: apply {t.target['kind']}/{t.target['metadata']['name']}")
            if any(t.state == "failed" for t in batch):
                continue  # reported as Failed at the top of the next call
            if not [t for t in tasks if t.state == "pending"]:
                # The last wave ran: the sync has succeeded, even while pruned objects are still terminating
                # ("if it is the last phase/wave and the only running tasks are non-hooks, then we are successful").
                terminating = [f"{t.obj['kind']}/{t.obj['metadata']['name']}" for t in batch if t.state == "pruned"
                               and t.live is not None]
                return SyncResult("Succeeded", "successfully synced (all tasks run)", steps, terminating)
