"""The simulated FLAME's own network: a Linux network namespace that the simulation makes and removes, holding its
loopback (the control plane, Argo CD and everything else on 127.0.0.1, as before) and the pod network of the
platform's pods, 198.18.0.0/16 (RFC 2544's range for test networks) routed to that loopback. Nothing in it is
reachable from, or reaches, any other network: a pod IP exists only inside.

Why a namespace: the API server reaches webhooks and aggregated APIs through their Service's EndpointSlices, and
the API server refuses loopback addresses in an EndpointSlice, so pods need addresses of their own; a namespace is
where such addresses can exist without touching the machine's network.

    net = PodNetwork.start(work)          # needs root (CI and the developers' machines are)
    procs.start(..., netns=net)           # a process in the namespace (Processes.start)
    net.forward(port)                     # 127.0.0.1:port on the host -> 127.0.0.1:port in the namespace
    link = net.link(port)                 # 127.0.0.1:link.port -> 127.0.0.1:port, both inside; link.cut(), .restore()
    with net.entered(): ...               # this thread's sockets in the namespace (the pod runtime's probes)
    net.stop()

Ports are chosen free on the host (simulation.control_plane.free_port) and used unchanged inside, so a URL means
the same on both sides and the host reaches what the tests and the demo need through `forward`.
"""
from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import os
import pathlib
import selectors
import socket
import subprocess
import threading

from simulation.control_plane import free_port
from simulation.processes import child_preexec, stop_process
from simulation.waiting import STOP_GRACE

POD_NETWORK = ipaddress.ip_network("198.18.0.0/16")
_CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _setns(path: str):
    fd = os.open(path, os.O_RDONLY)
    try:
        if _libc.setns(fd, _CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


class NetworkUnavailable(RuntimeError):
    """The namespace could not be made (not root, no unshare or ip)."""


class PodNetwork:
    def __init__(self, holder: subprocess.Popen, path: str):
        self.holder = holder
        self.path = path
        self._host = f"/proc/{os.getpid()}/task/{threading.get_native_id()}/ns/net"
        self._host_fd = os.open(self._host, os.O_RDONLY)
        self._forwarders: list[_Forwarder] = []
        self._links: list[Link] = []
        self._lock = threading.Lock()

    @classmethod
    def start(cls, work: pathlib.Path) -> PodNetwork:
        if os.geteuid() != 0:
            raise NetworkUnavailable("the simulated FLAME's network namespace needs root")
        holder = subprocess.Popen(["unshare", "--net", "--", "sleep", "infinity"], stdin=subprocess.DEVNULL,
                                  preexec_fn=child_preexec())
        path = f"/proc/{holder.pid}/ns/net"
        net = cls(holder, path)
        try:
            for _ in range(100):  # until unshare has made the namespace
                if os.path.exists(path) and os.stat(path).st_ino != os.stat(net._host).st_ino:
                    break
                holder.wait(timeout=0.05) if holder.poll() is not None else threading.Event().wait(0.05)
            else:
                raise NetworkUnavailable(f"unshare --net did not make a namespace (exit {holder.poll()})")
            for cmd in (["ip", "link", "set", "lo", "up"],
                        # Every address of the pod network is local in the namespace, as 127.0.0.0/8 is.
                        ["ip", "route", "add", "local", str(POD_NETWORK), "dev", "lo"]):
                done = subprocess.run(["nsenter", f"--net={path}", "--", *cmd], capture_output=True, text=True)
                if done.returncode != 0:
                    raise NetworkUnavailable(f"{' '.join(cmd)} in the namespace: {done.stderr.strip()}")
        except BaseException:
            net.stop()
            raise
        return net

    # ------------------------------------------------------------ entering

    def preexec(self):
        """For a child process, between fork and exec: into the namespace."""
        _setns(self.path)

    @contextlib.contextmanager
    def entered(self):
        """This thread in the namespace (sockets made meanwhile stay in it), then back."""
        with self._lock:
            _setns(self.path)
        try:
            yield
        finally:
            if _libc.setns(self._host_fd, _CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back to the host's network namespace")

    def enter_thread(self):
        """The calling thread moves into the namespace for good (a thread of the simulation's own)."""
        _setns(self.path)

    # ------------------------------------------------------------ reaching in from the host

    def forward(self, port: int):
        """127.0.0.1:port on the host relays to 127.0.0.1:port inside (the API server, the chart registry, ...)."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", int(port)))
        listener.listen(64)
        f = _Forwarder(listener, int(port), connect=lambda: self.connect_inside(int(port)))
        self._forwarders.append(f)
        f.start()

    def expose(self, port: int):
        """127.0.0.1:port inside relays to 127.0.0.1:port on the host (a test's server the cluster must reach,
        such as the image registry of the image-architecture policy)."""
        f = _Forwarder(self._listen_inside(port), int(port),
                       connect=lambda: socket.create_connection(("127.0.0.1", int(port))))
        self._forwarders.append(f)
        f.start()

    def link(self, port: int) -> Link:
        """A new port inside relaying to 127.0.0.1:port inside: the network between two sites of a platform, which
        a test cuts (every connection through it closed, new ones refused) and restores on the same port."""
        link = Link(self, int(port))
        link.restore()
        return link

    def _listen_inside(self, port: int) -> socket.socket:
        with self.entered():
            listener = socket.socket()
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", int(port)))
            listener.listen(64)
        return listener

    def connect_inside(self, port: int) -> socket.socket:
        with self.entered():
            s = socket.socket()
        s.connect(("127.0.0.1", port))
        return s

    def stop(self):
        for f in self._forwarders:
            f.stop()
        self._forwarders.clear()
        for link in self._links:
            link.cut()
        self._links.clear()
        stop_process(self.holder)
        with contextlib.suppress(OSError):
            os.close(self._host_fd)


class Link:
    """A port inside the namespace relaying to another port inside (PodNetwork.link)."""

    def __init__(self, net: PodNetwork, target: int):
        self.net, self.target = net, target
        self.port = free_port()
        self._forwarder: _Forwarder | None = None
        net._links.append(self)

    def cut(self):
        """Every connection through the link closed; new ones refused until restore()."""
        if self._forwarder is not None:
            self._forwarder.stop()
            self._forwarder = None

    def restore(self):
        if self._forwarder is None:
            self._forwarder = _Forwarder(self.net._listen_inside(self.port), self.port,
                                         connect=lambda: self.net.connect_inside(self.target))
            self._forwarder.start()


class _Forwarder(threading.Thread):
    """Relays every connection to one port, both ways, until stopped: each accepted connection to `connect()`."""

    def __init__(self, listener: socket.socket, port: int, connect):
        super().__init__(name=f"forward-{port}", daemon=True)
        self.listener, self.port, self.connect = listener, port, connect
        self.selector = selectors.DefaultSelector()
        self._stopping = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()

    def stop(self):
        self._stopping.set()
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self.join(timeout=STOP_GRACE)

    def run(self):
        sel = self.selector
        sel.register(self.listener, selectors.EVENT_READ, "accept")
        sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        peers: dict[socket.socket, socket.socket] = {}
        try:
            while not self._stopping.is_set():
                for key, _ in sel.select(timeout=1):
                    if key.data == "wake":
                        continue
                    if key.data == "accept":
                        client, _ = self.listener.accept()
                        try:
                            inside = self.connect()
                        except OSError:
                            client.close()
                            continue
                        peers[client], peers[inside] = inside, client
                        sel.register(client, selectors.EVENT_READ, "relay")
                        sel.register(inside, selectors.EVENT_READ, "relay")
                        continue
                    src = key.fileobj
                    dst = peers.get(src)
                    try:
                        data = src.recv(65536)
                    except OSError:
                        data = b""
                    if data and dst is not None:
                        try:
                            dst.sendall(data)
                            continue
                        except OSError:
                            pass
                    for s in (src, dst):
                        if s is not None and s in peers:
                            peers.pop(s, None)
                            with contextlib.suppress(KeyError, ValueError):
                                sel.unregister(s)
                            s.close()
        finally:
            for s in list(peers):
                s.close()
            self.listener.close()
            self._wake_r.close()
            self._wake_w.close()
