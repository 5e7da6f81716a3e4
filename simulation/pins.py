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
    """Tool -> the versions.env key it is built at: tools/tools.list, the one list of the tools, and the components'
    tools (@components there: each at its component's pin)."""
    from generator.components import COMPONENTS
    pairs = (line.split() for line in (TOOLS / "tools.list").read_text().splitlines())
    listed = {fields[0]: fields[1] for fields in pairs if len(fields) > 1 and not fields[0].startswith("#")}
    return {**listed,
            **{tool.name: facts.chart.app_version_pin for facts in COMPONENTS.values() for tool in facts.tools}}
