"""A cluster's API server as the inventory writes it (`clusters.<name>.server`): parsed as a URL, compared in a
normalised form, and the in-cluster address Argo CD reaches its own cluster at.

One API server has many spellings: `https://flame.example.org:6443/`, `https://FLAME.example.org:6443` and
`https://flame.example.org.:6443` are one server, as are `https://hub.example.org` and `https://hub.example.org:443`,
and `https://proxy.example.org/k8s//clusters/./c-1/` and `https://proxy.example.org/k8s/clusters/c-1` (Go's servers,
the API server and the proxies in front of it, clean a path so).
Rules compare the normalised form; the rendered objects keep the text the inventory wrote.

Pure: text in, a parsed server or ValueError out.
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
from dataclasses import dataclass

# Where Argo CD reaches the cluster it runs on (the manager's): its in-cluster destination.
IN_CLUSTER = "https://kubernetes.default.svc"
# The API server's Service in every cluster: from Argo CD's pods, `kubernetes.default`, `kubernetes.default.svc`
# and `kubernetes.default.svc.<cluster domain>` all name it, on any port or path.
_IN_CLUSTER_SERVICE = ("kubernetes", "default", "svc")
HTTPS_PORT = 443
MAX_PORT = 65535
# https://HOST[:PORT][/PATH]; HOST a DNS name, an IPv4 address or an [IPv6] literal; the schema's pattern.
PATTERN = r"^https://([A-Za-z0-9.-]+|\[[0-9A-Fa-f:]+\])(:[0-9]{1,5})?(/[A-Za-z0-9._~/-]*)?$"
_URL = re.compile(PATTERN)
_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_MAX_HOST = 253  # DNS


@dataclass(frozen=True)
class ApiServer:
    """A parsed API server URL: the host lower-cased, without a final dot (an address in its shortest form), the
    port (443 when none is written), the path cleaned, without a trailing '/'."""

    host: str
    port: int
    path: str

    @property
    def normalised(self) -> str:
        """The form two spellings of one server share: the default port left out."""
        port = "" if self.port == HTTPS_PORT else f":{self.port}"
        return f"https://{self.host}{port}{self.path}"

    @property
    def in_cluster(self) -> bool:
        """Whether this is the API server of the cluster Argo CD runs on, as Argo CD's pods reach it."""
        labels = tuple(self.host.split("."))
        return labels[:2] == _IN_CLUSTER_SERVICE[:2] and (len(labels) == 2 or labels[2] == _IN_CLUSTER_SERVICE[2])


def parse(text: str) -> ApiServer:
    """The server `text` names; ValueError saying what is wrong with it."""
    match = _URL.fullmatch(text)
    if not match:
        raise ValueError(f"{text!r} is not https://HOST[:PORT][/PATH]")
    host, port_text, path = match.group(1), match.group(2), match.group(3) or ""
    port = int(port_text[1:]) if port_text else HTTPS_PORT
    if not 1 <= port <= MAX_PORT:
        raise ValueError(f"{text!r}: port {port_text[1:]} is outside 1-{MAX_PORT}")
    return ApiServer(_host(text, host), port, _clean(path))


def _clean(path: str) -> str:
    """The path as Go's path.Clean makes it (repeated '/', '.' and '..' resolved), without a trailing '/'."""
    if not path:
        return ""
    cleaned = posixpath.normpath(re.sub("/+", "/", path))
    return "" if cleaned == "/" else cleaned


def _host(text: str, host: str) -> str:
    if host.startswith("["):
        try:
            return f"[{ipaddress.IPv6Address(host[1:-1]).compressed}]"
        except ValueError:
            raise ValueError(f"{text!r}: {host} is not an IPv6 address") from None
    name = host.lower().removesuffix(".")
    if re.fullmatch(r"[0-9.]+", name):
        try:
            return str(ipaddress.IPv4Address(name))
        except ValueError:
            raise ValueError(f"{text!r}: {host} is not an IPv4 address") from None
    if len(name) > _MAX_HOST or not all(_LABEL.fullmatch(label) and len(label) <= 63 for label in name.split(".")):
        raise ValueError(f"{text!r}: {host} is not a DNS name (labels of 1 to 63 letters, digits and '-', "
                         f"not starting or ending with '-', {_MAX_HOST} characters in all)")
    return name
