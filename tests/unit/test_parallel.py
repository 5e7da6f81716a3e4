"""generator/parallel.py: the second computation in a forked child, the outcome a single process gets; and a large
render, shared over two processes, byte for byte the render of one."""

from __future__ import annotations

import errno
import os
import signal

import pytest

from generator import parallel
from generator.files import staging
from generator.inventory import load_inventory_text, yaml11
from generator.tree import PARALLEL_FROM, render_trees
from tests.support import synth


@pytest.fixture
def two_cores(monkeypatch):
    monkeypatch.setattr(parallel, "_cores", lambda: 2)


def test_the_second_result_comes_from_another_process(two_cores):
    here, there = parallel.both(os.getpid, os.getpid)
    assert here == os.getpid() and there != here


def test_a_failure_in_the_child_is_raised_here_as_itself(two_cores):
    calls = []

    def second():
        calls.append(os.getpid())
        raise ValueError("two objects would be written to x.yaml")
    with pytest.raises(ValueError, match="two objects"):
        parallel.both(lambda: 1, second)
    assert calls == [os.getpid()]  # the child's call was in the child; this one is the retry here


def test_a_child_killed_is_replaced_by_the_computation_here(two_cores):
    parent = os.getpid()

    def second():
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return "computed here"
    assert parallel.both(lambda: 1, second) == (1, "computed here")


def test_without_retry_the_childs_error_is_raised_here_as_it_was(two_cores):
    """Writing files is not done twice: a full disk in the child is a full disk here."""
    calls = []

    def second():
        calls.append(os.getpid())
        raise OSError(errno.ENOSPC, "No space left on device", "/out/core/x.yaml")
    with pytest.raises(OSError) as raised:
        parallel.both(lambda: 1, second, retry=False)
    assert (raised.value.errno, raised.value.filename) == (errno.ENOSPC, "/out/core/x.yaml")
    assert calls == []  # not called here


def test_without_retry_a_killed_child_is_an_os_error(two_cores):
    def second():
        os.kill(os.getpid(), signal.SIGKILL)
    with pytest.raises(ChildProcessError, match="before it could report"):
        parallel.both(lambda: 1, second, retry=False)


def test_when_the_first_fails_the_child_is_stopped_and_reaped(two_cores, tmp_path):
    started = tmp_path / "child.pid"

    def second():
        started.write_text(str(os.getpid()))
        signal.pause()  # until killed

    def first():
        while not started.exists() or not started.read_text():
            pass
        raise KeyError("first")
    with pytest.raises(KeyError):
        parallel.both(first, second)
    with pytest.raises(ChildProcessError):
        os.waitpid(int(started.read_text()), os.WNOHANG)  # already reaped: no zombie left


def test_one_core_computes_both_here(monkeypatch):
    monkeypatch.setattr(parallel, "_cores", lambda: 1)
    assert parallel.both(os.getpid, os.getpid) == (os.getpid(), os.getpid())


@pytest.mark.parametrize("workers", [0, 3], ids=["one-cluster", "three-workers"])
def test_a_large_render_over_two_processes_is_the_render_of_one(monkeypatch, workers):
    """Emission shared with a child (a tree's halves; several clusters' workers beside the manager): the same bytes
    as in one process."""
    data = synth.build(8, 400, 3)
    inventory = load_inventory_text(synth.to_yaml(synth.spread(data, workers) if workers else data), "big.yaml")
    forks = count_forks(monkeypatch)
    shared = render_trees(inventory, "big.yaml")
    assert forks and len(shared.synced) >= PARALLEL_FROM
    monkeypatch.setattr(parallel, "_cores", lambda: 1)
    assert shared == render_trees(inventory, "big.yaml")


def test_a_large_tree_written_by_two_processes_is_the_tree(monkeypatch, tmp_path):
    files = {f"core/namespace/n{index:05d}.yaml": f"# {index}\n".encode() for index in range(staging.PARALLEL_FROM)}
    files.update({f"kueue/localqueue/q{index:05d}.yaml": b"" for index in range(10)})
    forks = count_forks(monkeypatch)
    staging.pending_tree(files, tmp_path / "out").stage().commit()
    assert forks
    assert read_tree(tmp_path / "out") == files


def test_a_write_failing_in_either_process_leaves_no_staging_behind(monkeypatch, tmp_path):
    """A file where the other half needs a directory: whichever process meets the clash, the render gets an
    OSError and the staging directory is removed; the output was never made."""
    files = {"clash": b"a file\n", **{f"core/namespace/n{index:05d}.yaml": b"x\n"
                                        for index in range(staging.PARALLEL_FROM)}, "clash/inside.yaml": b"y\n"}
    forks = count_forks(monkeypatch)
    with pytest.raises(OSError):
        staging.pending_tree(files, tmp_path / "out").stage()
    assert forks and sorted(os.listdir(tmp_path)) == []


def count_forks(monkeypatch) -> list[int]:
    calls: list[int] = []
    original = parallel.both

    def counted(first, second, **options):
        calls.append(1)
        return original(first, second, **options)
    monkeypatch.setattr(parallel, "both", counted)
    monkeypatch.setattr(parallel, "_cores", lambda: 2)
    return calls


def read_tree(root) -> dict[str, bytes]:
    files = {}
    for directory, _, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            with open(path, "rb") as f:
                files[os.path.relpath(path, root)] = f.read()
    return files


def test_a_large_inventory_reads_the_same_with_its_shape_checked_beside_composing(two_cores, monkeypatch):
    text = synth.to_yaml(synth.build(8, 400, 3))
    assert yaml11.PARALLEL_FROM <= len(text) <= yaml11.PARALLEL_UP_TO
    shapes_checked = []
    check_shape = yaml11._check_shape
    monkeypatch.setattr(yaml11, "_check_shape", lambda loader: (shapes_checked.append(os.getpid()),
                                                                check_shape(loader)))
    document, positions = yaml11.parse_inventory(text, "big.yaml")
    assert shapes_checked == []  # checked in the child, whose list this process never sees
    monkeypatch.setattr(yaml11, "PARALLEL_FROM", len(text) + 1)
    alone, alone_positions = yaml11.parse_inventory(text, "big.yaml")
    assert shapes_checked == [os.getpid()]
    assert document == alone and positions.at == alone_positions.at
