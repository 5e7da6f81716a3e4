"""What this checkout pins and where it keeps it: the versions of generator/versions.env, and the pin each upstream
tool of tools/tools.list is built at."""
import functools
import pathlib

from generator.versions import pins

REPO = pathlib.Path(__file__).resolve().parents[1]
TOOLS = REPO / "tools"


def versions():
    """Every pin of generator/versions.env (the one place versions are pinned), read by the generator's parser."""
    return pins()


@functools.lru_cache(maxsize=1)
def tool_pins() -> dict[str, str]:
    """Tool -> the versions.env key it is built at: tools/tools.list, the one list of the tools."""
    pairs = (line.split() for line in (TOOLS / "tools.list").read_text().splitlines())
    return {fields[0]: fields[1] for fields in pairs if fields and not fields[0].startswith("#")}
