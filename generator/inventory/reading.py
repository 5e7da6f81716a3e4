"""Reading the inventory's bytes, bounded whatever the input: at most MAX_INPUT_BYTES are read (an endless
/dev/zero is refused, not loaded), and the text must be UTF-8 made of characters YAML allows, or the
problem is reported at its line."""

from __future__ import annotations

import fcntl
import os
import re
import stat
from pathlib import Path

from generator.errors import InventoryInvalid, Problem

# These bounds leave a national-scale inventory room to grow several times while keeping any input within the
# render's memory and time bounds (the hostile-input benchmark measures that).
MAX_INPUT_BYTES = 4 * 1024 * 1024


# Characters YAML allows in a stream (YAML 1.1, 5.1: tab, line feed, carriage return, printable ASCII, NEL,
# U+00A0..U+D7FF, U+E000..U+FFFD, U+10000..U+10FFFF); anything else is refused here, at its line. Written as
# the complement of that set: the same characters, and a small class compiles in a fraction of the time a
# class negating ranges up to U+10FFFF takes, which every render pays at import.
_NOT_YAML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufffe\uffff]")


def _line_column(text: str, offset: int) -> tuple[int, int]:
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1


def decode_inventory(data: bytes, path: str) -> str:
    """UTF-8 text of YAML-allowed characters, or InventoryInvalid at the line of the first bad byte."""
    if len(data) > MAX_INPUT_BYTES:
        raise InventoryInvalid([Problem(path, 1, 1, "(file)", f"larger than {MAX_INPUT_BYTES:,} bytes; an inventory "
                                        "is far smaller (the national-scale example is 0.8 MB)")])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        good = data[:exc.start].decode("utf-8")
        line, column = _line_column(good, len(good))
        raise InventoryInvalid([Problem(path, line, column, "(file)",
                                        f"not UTF-8: byte 0x{data[exc.start]:02x} cannot start or continue a "
                                        "character here; save the file as UTF-8")]) from None
    return check_characters(text, path)


def check_characters(text: str, path: str) -> str:
    bad = _NOT_YAML.search(text)
    if bad:
        line, column = _line_column(text, bad.start())
        raise InventoryInvalid([Problem(path, line, column, "(file)",
                                        f"character U+{ord(bad.group()):04X} is not allowed in YAML")])
    # A byte order mark is a marker at the start of the file. Elsewhere YAML readers disagree about it: one reads
    # it as a new document, another as part of a comment or a string, so the file would mean different things to
    # gpugen's reader and its editor.
    inner_bom = text.find("\ufeff", 1)
    if inner_bom != -1:
        line, column = _line_column(text, inner_bom)
        raise InventoryInvalid([Problem(path, line, column, "(file)",
                                        "a byte order mark (U+FEFF) inside the file: remove it (only the first "
                                        "character of a file may be one)")])
    return text


def read_inventory_bytes(path: Path) -> bytes:
    """At most MAX_INPUT_BYTES + 1 bytes of the file: an endless input (/dev/zero, a pipe) is cut short and
    refused as too large, never loaded whole. A FIFO without a writer reads as empty instead of blocking."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise IsADirectoryError(21, "Is a directory", str(path))
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        chunks, size = [], 0
        while size <= MAX_INPUT_BYTES:
            chunk = os.read(fd, min(1 << 20, MAX_INPUT_BYTES + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
