"""The demo's welcome text (simulation/demo.py): every command it prints works as printed from any directory. The
text is made for a FLAME whose files are in a temporary directory; each command line is then read as the shell would
(comments dropped, `&&` splitting it) and checked for what depends on the directory it is run from:

- a path, a token naming a file of the demo or the repository, must be absolute (a line may `cd` to an absolute
  directory first, then name files in it);
- the program is a command found on PATH (kubectl, git), the reader's own ($EDITOR) or an absolute path (this
  Python, its gpugen), never `.venv/...` or whatever `python` PATH finds;
- git names its repository (`-C`);
- gpugen is given every option whose default is a path relative to the directory (`--inventory` of `report`...).
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

import click
import pytest

from generator.cli import main as gpugen_cli
from simulation import demo
from tests.support import REPO

SYSTEM_COMMANDS = {"kubectl", "git", "cd", "export"}


def fake_flame(work: Path, researchers: bool = True, prometheus: bool = True) -> SimpleNamespace:
    """What welcome() reads of a started FLAME, its files made under `work`."""
    checkout = work / "checkout"
    (checkout / "rendered").mkdir(parents=True)
    (checkout / "gpu_classes.yaml").write_text("")
    for path in (work / "apiserver" / "kubeconfig", work / "researchers" / "vision-lab.kubeconfig"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    researcher = SimpleNamespace(user="vision-lab-researcher", groups=["oidc:vision-lab"], namespaces=["vision-lab"],
                                 kubeconfig=work / "researchers" / "vision-lab.kubeconfig")
    return SimpleNamespace(
        timings={"ready": 123.0}, nodes=["gh200-0", "gh200-1", "cpu-0"],
        researchers={"vision-lab": researcher} if researchers else {},
        inventory=SimpleNamespace(groups={"vision-lab": SimpleNamespace(namespaces=["vision-lab"])}),
        admin_kubeconfig=work / "apiserver" / "kubeconfig",
        argocd=SimpleNamespace(repo=SimpleNamespace(url="git://127.0.0.1:9418/flame-gitops.git", checkout=checkout)),
        prometheus=SimpleNamespace(url="http://127.0.0.1:9090") if prometheus else None,
        skipped=["Kyverno's background controller"])


def command_lines(text: str) -> list[str]:
    """The lines a reader copies into a shell: those indented under a heading."""
    return [line.strip() for line in text.splitlines() if line.startswith("  ") and line.strip()]


def relative_default_paths(subcommand: str) -> list[str]:
    """gpugen SUBCOMMAND's options whose default is a path, resolved against the directory it is run from."""
    command = gpugen_cli.commands[subcommand]
    return [option for param in command.params if isinstance(param.type, click.Path) and isinstance(param.default, str)
            and not Path(param.default).is_absolute() for option in param.opts if option.startswith("--")]


def problems(line: str, places: list[Path]) -> list[str]:
    found = []
    words = shlex.split(line, comments=True)
    commands, current = [], []
    for word in words + ["&&"]:
        if word == "&&":
            commands.append(current)
            current = []
        else:
            current.append(word)
    moved = False  # after `cd ABSOLUTE &&`, names are relative to that directory: as printed, wherever from
    for words in filter(None, commands):
        program, args = words[0], words[1:]
        if program == "cd":
            moved = Path(args[0]).is_absolute()
            if not moved:
                found.append(f"cd to a relative directory {args[0]}")
            continue
        # $EDITOR and the like: the reader's own program, wherever it is run from.
        if program not in SYSTEM_COMMANDS and not program.startswith("$") and not Path(program).is_absolute():
            found.append(f"{program}: neither a system command nor an absolute path")
        if moved:
            continue
        for word in args:
            value = word.partition("=")[2] if word.startswith("-") or "=" in word else word
            if value and not Path(value).is_absolute() and any((place / value).exists() for place in places):
                found.append(f"{value}: a relative path")
        if program == "git" and "-C" not in args:
            found.append("git without -C: it acts on the directory it is run from")
        if Path(program).name == "gpugen":
            missing = [o for o in relative_default_paths(args[0]) if o not in args]
            if missing:
                found.append(f"gpugen {args[0]} without {', '.join(missing)}: read from the directory it is run from")
    return [f"{line}: {p}" for p in found]


@pytest.mark.parametrize("researchers, prometheus", [(True, True), (False, False)])
def test_every_printed_command_works_from_any_directory(tmp_path, researchers, prometheus):
    work = tmp_path / "gpugen-demo-x"
    text = demo.welcome(fake_flame(work, researchers, prometheus), work)
    lines = command_lines(text)
    assert any(line.startswith("kubectl create") or " create -f " in line for line in lines), text
    assert (f"{Path(sys.executable).parent / 'gpugen'} report --inventory " in text) == prometheus, text
    found = [p for line in lines for p in problems(line, [work, work / "checkout", REPO])]
    assert not found, "\n".join(found)


def test_the_check_finds_what_depends_on_the_directory(tmp_path):
    """The lines the welcome once printed, each refused for its reason."""
    work = tmp_path / "gpugen-demo-x"
    fake_flame(work)
    (work / "my-job.yaml").write_text("")
    places = [work, work / "checkout", REPO]
    assert problems(".venv/bin/gpugen report --prometheus http://127.0.0.1:9090 --from 1h", places)
    assert problems("/x/bin/gpugen report --prometheus http://127.0.0.1:9090", places)[0].endswith(
        "gpugen report without --inventory: read from the directory it is run from")
    assert problems("git commit -qam 'change an allocation'", places)
    assert problems("kubectl create -f my-job.yaml", places)
    assert problems("python -c 'print(1)'", places)
    assert problems(f"cd {work / 'checkout'} && $EDITOR gpu_classes.yaml", places) == []
    assert problems("cd checkout && $EDITOR gpu_classes.yaml", [work]) == [
        "cd checkout && $EDITOR gpu_classes.yaml: cd to a relative directory checkout"]
