"""The Go side of the pinned upstream: the tools tools/build.sh builds (tool_bin), files of the pinned Go modules
(module_dir), and the one-file Go programs the tests build against pinned modules (go_program, tests/oracles/)."""
import functools
import hashlib
import os
import pathlib
import shutil
import subprocess

from simulation.pins import TOOLS, tool_pins, versions
from simulation.prerequisites import unavailable
from simulation.waiting import ceiling


def cache_dir():
    """Where tools/build.sh puts what it builds ($GPUGEN_CACHE, else ~/.cache/gpugen); test helpers cache there too."""
    return pathlib.Path(os.environ.get("GPUGEN_CACHE") or pathlib.Path.home() / ".cache" / "gpugen")


def tool_bin(tool):
    """The cached binary tools/build.sh builds for `tool` at its pin."""
    return cache_dir() / "bin" / f"{tool}-{versions()[tool_pins()[tool]]}"


class ModuleUnavailable(RuntimeError):
    """tools/module-dir.sh could not provide MODULE@VERSION (not downloadable, or not a directory)."""


@functools.cache
def module_dir(module, version):
    """The unpacked, checksum-verified MODULE@VERSION from the Go module cache (tools/module-dir.sh), where
    upstream files (CRDs, charts, constants, go.mod) are read."""
    done = subprocess.run(["bash", str(TOOLS / "module-dir.sh"), module, version], capture_output=True, text=True,
                          timeout=ceiling(60))
    path = pathlib.Path(done.stdout.strip()) if done.returncode == 0 else None
    if path is None or not path.is_dir():
        raise ModuleUnavailable(f"tools/module-dir.sh {module} {version} failed:\n{done.stderr[-1000:]}")
    return path


def go(args, cwd):
    """`go ARGS` in `cwd` with the local toolchain (never a silent toolchain download); its stdout."""
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-buildvcs=false", "CGO_ENABLED": "0"}
    done = subprocess.run(["go", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=ceiling(180))
    assert done.returncode == 0, f"go {' '.join(args)} in {cwd}:\n{done.stdout}{done.stderr}"
    return done.stdout


def tidy_build_install(work, binary):
    """go mod tidy, then build the module in `work` into `binary` (renamed into place once complete)."""
    go(["mod", "tidy"], work)
    binary.parent.mkdir(parents=True, exist_ok=True)
    go(["build", "-trimpath", "-ldflags", "-s -w", "-o", f"{binary}.tmp", "."], work)
    os.replace(f"{binary}.tmp", binary)
    return binary


def go_program(source, module, requires, tmp_path_factory):
    """The one-file Go program `source` built against the pinned `requires` (MODULE@VERSION), cached under
    $GPUGEN_CACHE/bin by source and requirements. A missing Go toolchain skips locally and fails in CI; a failed
    build always fails."""
    digest = hashlib.sha256(source.read_bytes() + " ".join(requires).encode()).hexdigest()[:12]
    binary = cache_dir() / "bin" / f"{source.parent.name}-{digest}"
    if binary.is_file():
        return binary
    if shutil.which("go") is None:
        unavailable(f"building {source} needs the Go toolchain")
    work = tmp_path_factory.mktemp(source.parent.name)
    shutil.copy(source, work / "main.go")
    go(["mod", "init", module], work)
    for require in requires:
        go(["mod", "edit", f"-require={require}"], work)
    return tidy_build_install(work, binary)
