"""Faults and concurrency over a large synthetic inventory: a full disk (a wrapped write, and a real small
tmpfs), short writes, SIGKILL at random points, two renders of one output at once, and the same for edits.
After each, every output is either the whole old tree or the whole new one, and nothing is left behind.
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from tests.support import INVENTORY, REPO, read_files

from generator.files import fs, lock, staging
from generator.cli import main
from generator.inventory import load_inventory_text
from generator.tree import render_trees

from tests.support import synth
from simulation.waiting import ceiling

FLAME = INVENTORY.read_text()
NAME = "gpu_classes.yaml"


def synthetic(groups: int, seed: int = 7) -> str:
    return synth.to_yaml(synth.build(16, groups, 2, seed=seed))


@pytest.fixture(scope="module")
def inventories():
    """Two large inventories (about 700 objects each) that differ in most files, and their rendered trees."""
    texts = {"a": synthetic(300, seed=7), "b": synthetic(320, seed=8)}
    trees = {key: render_trees(load_inventory_text(text, NAME), NAME) for key, text in texts.items()}
    return texts, trees


def read_tree(directory: Path) -> dict[str, bytes]:
    return read_files(directory)


def state(tmp_path: Path) -> tuple[dict, dict, bytes | None]:
    docs = tmp_path / "docs" / "runtimes.md"
    return read_tree(tmp_path / "out"), read_tree(tmp_path / "boot"), docs.read_bytes() if docs.exists() else None


def as_state(trees) -> tuple[dict, dict, bytes]:
    return trees.synced, trees.bootstrap, trees.docs


def args_for(inventory: Path, tmp_path: Path) -> list[str]:
    return ["render", "--inventory", str(inventory), "--out", str(tmp_path / "out"),
            "--bootstrap-out", str(tmp_path / "boot"), "--docs-out", str(tmp_path / "docs" / "runtimes.md")]


def leftovers(tmp_path: Path) -> list[str]:
    return sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if is_temporary(p.name))


def is_temporary(name: str) -> bool:
    """A staging or temp file as the writer names them (fs.staging_prefix): hidden, with the mark; an object file
    such as monitoring.gpugen-flame-platform.yaml is neither."""
    return name.startswith(".") and fs.TEMP_MARK in name


def put(tmp_path: Path, text: str, folder: str = "") -> Path:
    path = tmp_path / folder / NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def with_os(monkeypatch, faulty) -> None:
    """Give the writer (every module of generator.files) `faulty` as its `os`."""
    for module in (fs, lock, staging):
        monkeypatch.setattr(module, "os", faulty)


class FaultyOs(SimpleNamespace):
    """generator.files' view of `os`, with a write that fails after `budget` bytes (a short write first, as
    a filling disk does) or that writes at most `chunk` bytes per call."""

    def __init__(self, budget: int | None = None, chunk: int | None = None, code: int = errno.ENOSPC):
        super().__init__(budget=budget, chunk=chunk, code=code, written=0)

    def __getattr__(self, name):
        return getattr(os, name)

    def write(self, fd, data):
        data = bytes(data)
        if self.chunk is not None:
            data = data[:self.chunk]
        if self.budget is not None:
            room = self.budget - self.written
            if room <= 0:
                raise OSError(self.code, os.strerror(self.code))
            data = data[:room]
        written = os.write(fd, data)
        self.written += written
        return written


# ----------------------------------------------------------------------------------------- full disk

@pytest.mark.parametrize("seed", range(6))
def test_disk_full_mid_file_keeps_the_previous_tree(seed, inventories, tmp_path, monkeypatch):
    texts, trees = inventories
    inventory = put(tmp_path, texts["a"])
    assert CliRunner().invoke(main, args_for(inventory, tmp_path)).exit_code == 0
    assert state(tmp_path) == as_state(trees["a"])
    inventory.write_text(texts["b"])
    old, new = trees["a"], trees["b"]
    written = (sum(len(v) for k, v in new.synced.items() if old.synced.get(k) != v)
               + sum(len(v) for k, v in new.bootstrap.items() if old.bootstrap.get(k) != v) + len(new.docs))
    budget = random.Random(seed).randint(0, written - 1)  # fails somewhere in what the render must write
    with_os(monkeypatch, FaultyOs(budget=budget))
    result = CliRunner().invoke(main, args_for(inventory, tmp_path))
    monkeypatch.undo()
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "No space left on device" in errors[0], result.output
    assert state(tmp_path) == as_state(trees["a"]), "the previous tree must be intact"
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("code", [errno.EACCES, errno.EROFS, errno.EIO])
def test_other_write_errors_are_one_line_and_keep_the_tree(code, inventories, tmp_path, monkeypatch):
    texts, trees = inventories
    inventory = put(tmp_path, texts["a"])
    assert CliRunner().invoke(main, args_for(inventory, tmp_path)).exit_code == 0
    inventory.write_text(texts["b"])
    with_os(monkeypatch, FaultyOs(budget=5000, code=code))
    result = CliRunner().invoke(main, args_for(inventory, tmp_path))
    monkeypatch.undo()
    assert result.exit_code == 2 and os.strerror(code) in result.output, result.output
    assert state(tmp_path) == as_state(trees["a"])
    assert leftovers(tmp_path) == []


def test_short_writes_are_completed_not_truncated(inventories, tmp_path, monkeypatch):
    texts, trees = inventories
    inventory = put(tmp_path, texts["b"])
    with_os(monkeypatch, FaultyOs(chunk=7))
    result = CliRunner().invoke(main, args_for(inventory, tmp_path))
    monkeypatch.undo()
    assert result.exit_code == 0, result.output
    assert state(tmp_path) == as_state(trees["b"])


TMPFS_SCRIPT = textwrap.dedent("""
    set -e
    mount -t tmpfs -o size={size} gpugen-test {mnt}
    trap 'umount {mnt}' EXIT
    cd {repo}
    outputs="--out {mnt}/out --bootstrap-out {mnt}/boot --docs-out {mnt}/docs.md"
    snapshot='import json; from tests.unit.test_faults import snapshot; print(json.dumps(snapshot("{mnt}")))'
    {python} -m generator render --inventory {small} $outputs > /dev/null
    {python} -c "$snapshot" > {work}/before.json
    set +e
    {python} -m generator render --inventory {big} $outputs 2> {work}/stderr
    echo $? > {work}/rc
    {python} -c "$snapshot" > {work}/after.json
""")


def snapshot(root: str) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_bytes().hex() if p.is_file() else "dir" for p in Path(root).rglob("*")}


def test_a_really_full_tmpfs_keeps_the_previous_tree(inventories, tmp_path):
    """A real file system running out of space (a 1 MiB tmpfs in a private mount namespace): needs root."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1) to mount a private tmpfs")
    small, big = put(tmp_path, FLAME, "small"), put(tmp_path, synthetic(2000), "big")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    script = TMPFS_SCRIPT.format(size="1m", mnt=mnt, repo=REPO, python=sys.executable, small=small, big=big,
                                 work=tmp_path)
    run = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], capture_output=True,
                         text=True, timeout=ceiling(12))
    if run.returncode != 0 and "mount" in run.stderr:
        pytest.skip(f"cannot mount a tmpfs here: {run.stderr.strip()}")
    assert run.returncode == 0, run.stderr
    stderr = (tmp_path / "stderr").read_text()
    assert (tmp_path / "rc").read_text().strip() == "2", stderr
    assert "No space left on device" in stderr and "Traceback" not in stderr and len(stderr.splitlines()) == 1
    before, after = (json.loads((tmp_path / name).read_text()) for name in ("before.json", "after.json"))
    assert after == before, "the previous tree (and nothing else) must be on the file system"


# ----------------------------------------------------------------------------------------- kill and race

def start_render(inventory: Path, tmp_path: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "generator", *args_for(inventory, tmp_path)], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_sigkill_at_random_points_never_leaves_a_mixed_tree(inventories, tmp_path):
    texts, trees = inventories
    inventory = put(tmp_path, texts["a"])
    assert CliRunner().invoke(main, args_for(inventory, tmp_path)).exit_code == 0
    started = time.monotonic()
    inventory.write_text(texts["b"])
    probe = start_render(inventory, tmp_path)
    probe.wait(timeout=ceiling(6))
    duration = time.monotonic() - started
    rng = random.Random(20261203)
    outcomes = {"a": 0, "b": 0}
    for attempt in range(10):
        key = "a" if attempt % 2 else "b"
        inventory.write_text(texts[key])
        process = start_render(inventory, tmp_path)
        try:
            if attempt < 4:  # anywhere in the run: start-up, reading, rendering, writing, swapping
                time.sleep(rng.uniform(0.1, duration * 1.1))
            else:  # while the new tree is being written or swapped in
                deadline = time.monotonic() + ceiling(6)
                while not any(is_temporary(p.name) for p in tmp_path.iterdir()) and process.poll() is None:
                    assert time.monotonic() < deadline
                    time.sleep(0.002)
                time.sleep(rng.uniform(0, 0.4))
            process.send_signal(signal.SIGKILL)
        finally:
            process.wait(timeout=ceiling(6))
        synced, bootstrap, docs = state(tmp_path)
        for found, expected in ((synced, "synced"), (bootstrap, "bootstrap"), (docs, "docs")):
            options = [getattr(trees[k], expected) for k in ("a", "b")]
            assert found in options, f"attempt {attempt}: {expected} is neither the old nor the new tree"
        outcomes["a" if synced == trees["a"].synced else "b"] += 1
    # The next render cleans up whatever the killed ones left and completes.
    assert CliRunner().invoke(main, args_for(inventory, tmp_path)).exit_code == 0
    assert leftovers(tmp_path) == []
    assert state(tmp_path) == as_state(trees[key])
    print(f"SIGKILL outcomes over 10 kills: {outcomes} (render took {duration:.2f} s)")


def test_concurrent_renders_serialise(inventories, tmp_path):
    texts, trees = inventories
    first, second = put(tmp_path, texts["a"], "a"), put(tmp_path, texts["b"], "b")
    for _ in range(3):
        processes = [start_render(first, tmp_path), start_render(second, tmp_path)]
        results = [(p.wait(timeout=ceiling(12)), p.stderr.read().decode()) for p in processes]
        assert [code for code, _ in results] == [0, 0], results
        found = state(tmp_path)
        assert found in (as_state(trees["a"]), as_state(trees["b"])), "all three outputs from one render"
        assert leftovers(tmp_path) == []


def test_a_tree_changed_under_the_writer_is_not_hard_linked(inventories, tmp_path):
    """A file changed between reading and swapping (by anything that ignores the lock) is written, not linked."""
    texts, trees = inventories
    inventory = put(tmp_path, texts["a"])
    assert CliRunner().invoke(main, args_for(inventory, tmp_path)).exit_code == 0
    pending = staging.pending_tree(trees["a"].synced, tmp_path / "out")
    victim = next(iter(trees["a"].synced))
    time.sleep(0.01)
    (tmp_path / "out" / victim).write_bytes(b"# Generated by gpugen from x\ntampered\n")
    pending.changes.changed.append("(forced)")  # make the apply do a swap
    staging.apply_outputs([pending])
    assert read_tree(tmp_path / "out") == trees["a"].synced


# ----------------------------------------------------------------------------------------- edits

SET_IMAGE = ["inventory", "set-image", "gh200", "ghcr.io/urcf/pytorch:2.10.0-cuda13.0"]


def edit(inventory: Path, command: list[str] = SET_IMAGE):
    return CliRunner().invoke(main, [*command[:2], "--inventory", str(inventory), *command[2:]])


def test_edit_on_a_full_disk_leaves_the_file_and_no_temp_file(tmp_path, monkeypatch):
    inventory = put(tmp_path, FLAME)
    with_os(monkeypatch, FaultyOs(budget=100))
    result = edit(inventory)
    monkeypatch.undo()
    assert result.exit_code == 2 and "No space left on device" in result.output, result.output
    assert inventory.read_text() == FLAME
    assert sorted(p.name for p in tmp_path.iterdir()) == [NAME]


def test_edit_keeps_mode_symlink_and_crlf(tmp_path):
    real = tmp_path / "real.yaml"
    real.write_bytes(FLAME.replace("\n", "\r\n").encode())
    real.chmod(0o600)
    link = tmp_path / NAME
    link.symlink_to(real)
    assert edit(link).exit_code == 0
    assert link.is_symlink() and oct(real.stat().st_mode & 0o777) == "0o600"
    before, after = FLAME.replace("\n", "\r\n").encode().split(b"\r\n"), real.read_bytes().split(b"\r\n")
    assert len(before) == len(after) and b"\n" not in b"".join(after)
    assert [i for i, (x, y) in enumerate(zip(before, after)) if x != y] == [
        next(i for i, line in enumerate(before) if b"image: " in line)]


def test_concurrent_edits_both_land(tmp_path):
    inventory = put(tmp_path, FLAME)
    commands = [[sys.executable, "-m", "generator", "inventory", "add-namespace", "--inventory", str(inventory),
                 "vision-lab", f"vision-lab-{n}"] for n in range(4)]
    processes = [subprocess.Popen(c, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for c in commands]
    assert [p.wait(timeout=ceiling(12)) for p in processes] == [0] * 4, [p.stderr.read() for p in processes]
    text = inventory.read_text()
    assert all(f"vision-lab-{n}" in text for n in range(4)), text
    assert sorted(p.name for p in tmp_path.iterdir()) == [NAME]


class FailingReplace(FaultyOs):
    """The last swap (the docs page, after both trees were swapped in) fails."""

    def replace(self, source, target):
        raise OSError(errno.EIO, os.strerror(errno.EIO), str(target))


def test_a_failed_last_swap_rolls_back_the_swaps_already_made(inventories, tmp_path, monkeypatch):
    texts, trees = inventories
    inventory = put(tmp_path, texts["a"])
    assert CliRunner().invoke(main, args_for(inventory, tmp_path)).exit_code == 0
    inventory.write_text(texts["b"])
    with_os(monkeypatch, FailingReplace())
    result = CliRunner().invoke(main, args_for(inventory, tmp_path))
    monkeypatch.undo()
    assert result.exit_code == 2 and "Input/output error" in result.output, result.output
    assert state(tmp_path) == as_state(trees["a"]), "both trees swapped back"
    assert leftovers(tmp_path) == []


def test_trees_are_swapped_with_rename_exchange_where_the_os_offers_it(tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "marker").write_text("first")
    if not fs.exchange(first, second):
        pytest.skip("this file system has no renameat2(RENAME_EXCHANGE); the writer falls back to two renames")
    assert (second / "marker").read_text() == "first" and not (first / "marker").exists()
    # And the writer uses it: with the exchange refused, a render still works (two renames).
    inventory = put(tmp_path, FLAME)
    assert CliRunner().invoke(main, args_for(inventory, tmp_path)).exit_code == 0
    calls = []
    real = fs.exchange
    monkeypatch.setattr(staging, "exchange", lambda a, b: calls.append((a, b)) or real(a, b))
    inventory.write_text(FLAME.replace("cpu: 36", "cpu: 30", 1))
    assert CliRunner().invoke(main, args_for(inventory, tmp_path)).exit_code == 0
    assert any(b == (tmp_path / "out").resolve() for _, b in calls), calls
    monkeypatch.setattr(staging, "exchange", lambda a, b: False)
    inventory.write_text(FLAME)
    assert CliRunner().invoke(main, args_for(inventory, tmp_path)).exit_code == 0
    assert state(tmp_path) == as_state(render_trees(load_inventory_text(FLAME, NAME), NAME))
    assert leftovers(tmp_path) == []
