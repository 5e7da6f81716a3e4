"""What this checkout pins and where it keeps it: the versions of generator/versions.env, and the pin each upstream
tool of tools/tools.list is built at."""
import dataclasses
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


@dataclasses.dataclass(frozen=True)
class KubernetesLine:
    """One Kubernetes minor the tree is checked on: its pins in generator/versions.env and the tools built at them."""
    name: str                 # "newest" or "previous"
    kubernetes_pin: str       # the versions.env key of its Kubernetes release
    etcd_pin: str             # ... and of the etcd it runs on
    apiserver_tool: str       # tools/tools.list names
    etcd_tool: str

    @property
    def version(self) -> str:
        return versions()[self.kubernetes_pin]

    @property
    def minor(self) -> str:
        """"1.37" of v1.37.2: what test ids and messages name."""
        return ".".join(self.version.removeprefix("v").split(".")[:2])


# The newest line runs every simulated cluster; the API-server tier and kubeconform check the tree on both.
NEWEST = KubernetesLine("newest", "KUBERNETES_VERSION", "ETCD_VERSION", "kube-apiserver", "etcd")
PREVIOUS = KubernetesLine("previous", "KUBERNETES_PREVIOUS_VERSION", "ETCD_PREVIOUS_VERSION",
                          "kube-apiserver-previous", "etcd-previous")
KUBERNETES_LINES = (NEWEST, PREVIOUS)
