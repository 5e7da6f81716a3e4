"""The simulated FLAME's harness itself: processes never outlive it, a component that fails is named with its
log, and the pod runtime changes only the listeners of what the charts run (pods.py)."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
import time

import pytest
import yaml

from simulation.processes import ComponentFailed, Processes, leftover_processes, wait_ready
from simulation.waiting import ceiling
from simulation import go_tools, manifests, prerequisites

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_a_component_that_fails_to_start_is_named_with_its_log(tmp_path):
    procs = Processes()
    try:
        p = procs.start("kueue", ["sh", "-c", "echo 'flag provided but not defined: -bogus'; exit 2"],
                        tmp_path / "logs" / "kueue.log")
        with pytest.raises(ComponentFailed) as failed:
            wait_ready(p, lambda: False, 30, "kueue /readyz")
    finally:
        procs.stop()
    msg = str(failed.value)
    assert msg.startswith("kueue exited with code 2")
    assert str(tmp_path / "logs" / "kueue.log") in msg and "flag provided but not defined" in msg


def test_stop_ends_every_process_even_one_ignoring_sigterm(tmp_path):
    procs = Processes()
    procs.start("polite", ["sleep", "300"], tmp_path / "a.log")
    procs.start("stubborn", ["sh", "-c", "trap '' TERM; while true; do sleep 1; done"], tmp_path / "b.log")
    pids = procs.pids()
    time.sleep(0.3)
    started = time.monotonic()
    procs.stop(grace=2)
    assert leftover_processes(pids) == []
    assert 2 <= time.monotonic() - started < ceiling(1), "SIGKILL once the grace period is over, not before"


def test_processes_die_with_the_python_process_that_started_them(tmp_path):
    """Even a SIGKILLed test run leaves nothing behind (PR_SET_PDEATHSIG)."""
    script = textwrap.dedent(f"""
        import time
        from simulation.processes import Processes
        p = Processes().start("sleeper", ["sleep", "300"], {str(tmp_path / 'sleep.log')!r})
        print(p.popen.pid, flush=True)
        time.sleep(300)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=REPO)
    child = int(parent.stdout.readline())
    assert leftover_processes([child]) == [child]
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + ceiling(1)
    while leftover_processes([child]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leftover_processes([child]) == []


def test_a_failed_test_says_where_its_processes_logged(tmp_path):
    """tests/conftest.py names the logs directory of every process that ran during a failed test (its fixtures'
    too), under the failure and in the summary; a passing test prints none."""
    (tmp_path / "test_inner.py").write_text(textwrap.dedent("""
        import pytest
        from simulation.processes import Processes

        @pytest.fixture
        def cluster(tmp_path):
            procs = Processes()
            procs.start("etcd", ["echo", "started"], tmp_path / "logs" / "etcd.log")
            yield
            procs.stop()

        def test_fails(cluster):
            assert False, "deliberately"

        def test_passes(cluster):
            pass
    """))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider",
                           f"--basetemp={tmp_path / 'tmp'}", "test_inner.py"], cwd=tmp_path, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=ceiling(30))
    assert done.returncode == 1, done.stdout + done.stderr
    logs = tmp_path / "tmp" / "test_fails0" / "logs"
    assert f"logs of the simulated cluster: {logs}\n" in done.stdout, done.stdout
    assert f"logs of the simulated cluster: {logs}  (1 failed: test_inner.py::test_fails)" in done.stdout
    assert "test_passes0" not in done.stdout
    assert (logs / "etcd.log").read_text().endswith("started\n")


# ---------------------------------------------------------------- the pod runtime's one change, on the real charts

def test_listeners_on_all_interfaces_bind_the_pod_ip_and_nothing_else_changes():
    from simulation.pods import _listeners
    ip = "127.101.0.7"
    assert _listeners("--metrics-bind-address=:8443", ip) == f"--metrics-bind-address={ip}:8443"
    assert _listeners("--health-probe-bind-address=0.0.0.0:8081", ip) == f"--health-probe-bind-address={ip}:8081"
    assert _listeners("[::]:9443", ip) == f"{ip}:9443"
    for unchanged in ("--serverIP=10.0.0.1:443", "https://kyverno-svc.kyverno.svc:443/validate", "127.0.0.1:6060",
                      "--webhookTimeout=10", "--loggingFormat=text", "localhost:8080"):
        assert _listeners(unchanged, ip) == unchanged


@pytest.fixture(scope="module")
def chart_configurations():
    """The controller-runtime Configuration files of the committed component Applications, as helm renders them
    for Argo CD."""
    from simulation.components import chart_objects, component_applications
    helm = go_tools.tool_bin("helm")
    if not os.access(helm, os.X_OK):
        prerequisites.unavailable(f"{helm} is missing: run `bash tools/build.sh helm`")
    out = {}
    for app in component_applications(manifests.bootstrap_dir()):
        for o in chart_objects(app):
            if o.get("kind") != "ConfigMap":
                continue
            for key, text in (o.get("data") or {}).items():
                try:
                    doc = yaml.safe_load(text)
                except yaml.YAMLError:
                    continue
                if isinstance(doc, dict) and doc.get("kind") == "Configuration":
                    out[f"{o['metadata']['name']}/{key}"] = doc
    if not out:
        prerequisites.unavailable(f"no component Applications under {manifests.bootstrap_dir()}")
    return out


def test_configurations_change_only_their_listeners(chart_configurations):
    """Kueue's, Trainer's and JobSet's Configuration as the pod runtime writes them: the webhook, probe and metrics
    listeners (and Kueue's visibility server) on the pod's IP with their ports; every other field (certificates and cert
    management included) as the chart has it."""
    import copy
    from simulation.pods import _localize_configuration
    ip = "127.101.0.9"
    assert len(chart_configurations) >= 3, sorted(chart_configurations)
    for name, doc in chart_configurations.items():
        local = _localize_configuration(copy.deepcopy(doc), ip, {"health": 8081, "metrics": 8443})
        assert local["webhook"]["host"] == ip, name
        for section, key in (("health", "healthProbeBindAddress"), ("metrics", "bindAddress")):
            # Written out where the chart leaves it to the default (all interfaces, which pods would share).
            port = str(doc[section][key]).rsplit(":", 1)[1] if key in (doc.get(section) or {}) else \
                {"health": "8081", "metrics": "8443"}[section]
            assert local[section][key] == f"{ip}:{port}", (name, local[section])
        listeners = ("webhook", "health", "metrics")
        if doc["apiVersion"].startswith("config.kueue.x-k8s.io/"):
            # Kueue's visibility API server, on all interfaces by default.
            assert local["visibilityServer"] == {**doc.get("visibilityServer", {}), "bindAddress": ip}, name
            listeners += ("visibilityServer",)

        def strip(d):
            return {k: v for k, v in d.items() if k not in listeners}

        assert strip(local) == strip(doc), name
        for section in ("health", "metrics"):
            def keep(d):
                return {k: v for k, v in (d.get(section) or {}).items()
                        if k not in ("healthProbeBindAddress", "bindAddress")}

            assert keep(local) == keep(doc), (name, section)
        assert {k: v for k, v in local["webhook"].items() if k != "host"} == \
            {k: v for k, v in (doc.get("webhook") or {}).items() if k != "host"}, name


def test_the_ledger_counts_each_class_s_accelerator_in_its_flavor():
    """A Workload's units of each class's resource, by flavor (a MIG slice, an AMD GPU, a time-slice), and FLAME's
    GPUs as before; a resource no class has (cpu) is never counted."""
    from generator.inventory import load_inventory
    from simulation.ledger import WorkloadLedger

    def workload(uid: str, usage: dict[str, tuple[str, str]]) -> dict:
        return {"metadata": {"uid": uid, "namespace": "nlp-lab", "name": uid},
                "status": {"conditions": [{"type": "QuotaReserved", "status": "True",
                                           "lastTransitionTime": "2025-01-01T00:00:00Z"}],
                           "admission": {"clusterQueue": "nlp-lab", "podSetAssignments": [{
                               "flavors": {resource: flavor for resource, (flavor, _) in usage.items()},
                               "resourceUsage": {resource: amount for resource, (_, amount) in usage.items()}}]}}}

    start = 1735689600.0
    mixed = WorkloadLedger(None, load_inventory(REPO / "examples" / "mixed-accelerators" / "gpu_classes.yaml"))
    mixed.observe([workload("mig", {"nvidia.com/mig-1g.10gb": ("a100-1g", "2"), "cpu": ("a100-1g", "8")}),
                   workload("amd", {"amd.com/gpu": ("mi300x", "4")})], start)
    assert mixed.gpu_seconds(until=start + 10) == {("nlp-lab", "a100-1g"): 20.0, ("nlp-lab", "mi300x"): 40.0}
    flame = WorkloadLedger(None, load_inventory(REPO / "gpu_classes.yaml"))
    flame.observe([workload("gpu", {"nvidia.com/gpu": ("gh200", "1")}),
                   workload("amd", {"amd.com/gpu": ("mi300x", "4")})], start)
    assert flame.gpu_seconds(until=start + 10) == {("nlp-lab", "gh200"): 10.0}
