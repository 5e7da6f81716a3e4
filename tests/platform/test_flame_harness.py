"""The simulated FLAME's harness itself: processes never outlive it, a component that fails is named with its
log, and the chart -> local process transform changes only what it documents (components.py)."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
import time

import pytest
import yaml

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from processes import ComponentFailed, Processes, leftover_processes, wait_ready  # noqa: E402
from validation import validation_support as vs  # noqa: E402


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
    procs.stop()
    assert leftover_processes(pids) == []
    assert time.monotonic() - started < 30


def test_processes_die_with_the_python_process_that_started_them(tmp_path):
    """Even a SIGKILLed test run leaves nothing behind (PR_SET_PDEATHSIG)."""
    script = textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {str(HERE)!r})
        from processes import Processes
        p = Processes().start("sleeper", ["sleep", "300"], {str(tmp_path / 'sleep.log')!r})
        print(p.popen.pid, flush=True)
        time.sleep(300)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    assert leftover_processes([child]) == [child]
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while leftover_processes([child]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leftover_processes([child]) == []


# ---------------------------------------------------------------- the transform, on the real charts

@pytest.fixture(scope="module")
def localized(tmp_path_factory):
    """Every component Application of the committed bootstrap/ through helm template and localize()."""
    from components import chart_objects, component_applications, localize
    from validation.control_plane import make_pki
    helm = vs.tool_bin("helm", "HELM_VERSION")
    if not os.access(helm, os.X_OK):
        vs.unavailable(f"{helm} is missing: run `bash tools/build.sh helm`")
    work = tmp_path_factory.mktemp("localize")
    (work / "pki").mkdir()
    make_pki(work / "pki")

    class Plane:  # localize needs only the CA
        pki = work / "pki"
    out = {}
    for app in component_applications(vs.bootstrap_dir()):
        name = app["metadata"]["labels"]["gpugen/component"]
        objects = chart_objects(app)
        out[name] = (app, objects, localize(name, objects, work / "components", Plane))
    if not out:
        vs.unavailable(f"no component Applications under {vs.bootstrap_dir()}")
    return out


# What the transform may change in a controller-runtime Configuration: listeners and certificates only.
LOCAL_KEYS = {"health", "metrics", "webhook", "internalCertManagement", "certManagement", "statusServer",
              "leaderElection"}


def test_kueue_runs_with_the_configuration_of_its_application(localized):
    app, _, lc = localized["kueue"]
    rendered = yaml.safe_load(app["spec"]["source"]["helm"]["valuesObject"]["managerConfig"]
                              ["controllerManagerConfigYaml"])
    (config_arg,) = [a for a in lc.argv if a.startswith("--config=")]
    running = yaml.safe_load(pathlib.Path(config_arg.split("=", 1)[1]).read_text())
    strip = lambda d: {k: v for k, v in d.items() if k not in LOCAL_KEYS}  # noqa: E731
    # The chart adds only its release namespace to the Application's configuration.
    assert strip(running) == {**strip(rendered), "namespace": app["spec"]["destination"]["namespace"]}
    assert running["internalCertManagement"]["enable"] is False
    assert running["webhook"]["host"] == "127.0.0.1"


def test_only_listeners_and_certificates_are_localized(localized):
    """Every config file: each listener is on 127.0.0.1; each webhook a loopback URL trusting the test CA; every
    CRD, RBAC object and ConfigMap of the chart is applied unchanged; only the documented kinds are left out."""
    for name, (_, objects, lc) in localized.items():
        for hook_config in lc.webhooks:
            for hook in hook_config["webhooks"]:
                assert hook["clientConfig"]["url"].startswith("https://127.0.0.1:"), (name, hook["name"])
                assert "service" not in hook["clientConfig"]
        applied = {(o["kind"], o["metadata"]["name"]) for o in lc.apply_first}
        for o in objects:
            if o["kind"] in ("CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                             "ServiceAccount", "ConfigMap") and "helm.sh/hook" not in o["metadata"].get("annotations", {}):
                assert (o["kind"], o["metadata"]["name"]) in applied, (name, o["kind"], o["metadata"]["name"])
                assert o in lc.apply_first, f"{name}: {o['kind']} {o['metadata']['name']} was changed"
        left_out = {o["kind"] for o in objects} - {o["kind"] for o in lc.apply_first} - {
            "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
        assert left_out <= {"Deployment", "APIService", "Pod", "Job", "CronJob"}, (name, left_out)
        # An APIService pointing at a Service no pod backs makes discovery fail, which stalls namespace deletion.
        assert "APIService" not in {o["kind"] for o in lc.apply_first}, name
        listeners = [a for a in lc.argv if ":" in a and "=" in a and "127.0.0.1" not in a and "://" not in a
                     and a.split("=", 1)[1].startswith(":")]
        assert not listeners, (name, listeners)
