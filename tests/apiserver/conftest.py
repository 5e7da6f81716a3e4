"""API-server tier fixtures: a real etcd + kube-apiserver with the pinned upstream CRDs installed.

How it is started, and why so (RBAC, an admin client certificate, openssl, raw HTTP): control_plane.py
and README.md in this directory. The e2e tier (tests/e2e/kueue_e2e.py) starts its own from the same module.

Missing binaries or rendered tree: the tests FAIL when CI is set (run `make tools`),
and are skipped with the reason otherwise.
"""
import pytest

from simulation.control_plane import prepare_cluster, start_control_plane
from simulation.manifests import load_one, manifest_files, rel, rendered_dir
from simulation.pins import KUBERNETES_LINES
from simulation.prerequisites import unavailable
from tests.apiserver.apiserver_support import broken_files


def pytest_generate_tests(metafunc):
    # Parametrize by file so each object is its own test id; an absent tree yields one
    # placeholder param that fails (CI) or skips (local) inside the test.
    if "manifest_file" in metafunc.fixturenames:
        files = manifest_files() or [None]
        metafunc.parametrize("manifest_file", files, ids=[rel(f) if f else "no-tree" for f in files])
    if "runtime_file" in metafunc.fixturenames:
        files = [f for f in manifest_files() if load_one(f).get("kind") == "ClusterTrainingRuntime"]
        files = files or [None]
        metafunc.parametrize("runtime_file", files, ids=[f.stem if f else "no-runtimes" for f in files])
    if "broken_file" in metafunc.fixturenames:
        files = broken_files()
        metafunc.parametrize("broken_file", files, ids=[f.stem for f in files])


@pytest.fixture(scope="session")
def tree_present():
    # Session scope: one walk of the tree per run, not one per test (8,000 objects at national scale).
    if not manifest_files():
        unavailable(f"no rendered objects under {rendered_dir()} (run `python -m generator render`)")


@pytest.fixture(scope="package", params=KUBERNETES_LINES, ids=lambda line: f"k8s-{line.minor}")
def control_plane(request, tmp_path_factory):
    """This tier's control plane (control_plane.ControlPlane: its CA for issuing further client
    certificates, the admin kubeconfig), the pinned CRDs Established and the tree's namespaces created;
    the processes are stopped when the tier's tests are done. Once per Kubernetes line the tree is checked on (the
    newest and the previous minor, simulation/pins.py): every test that needs a cluster runs on each."""
    line = request.param
    with start_control_plane(tmp_path_factory.mktemp(f"apiserver-{line.minor}"), line=line) as plane:
        prepare_cluster(plane)
        yield plane


@pytest.fixture(scope="package")
def cluster(control_plane):
    """Admin client (simulation.kube.Kube) of the tier's control plane."""
    return control_plane.kube
