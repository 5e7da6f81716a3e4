"""The broken corpus of the API-server tier (tests/apiserver/broken/): its files and their `# key: value` headers."""
import pathlib

HERE = pathlib.Path(__file__).resolve().parent


def header(path, key):
    """Values of leading `# key: value` comment lines (used by the broken corpus)."""
    vals = []
    for line in pathlib.Path(path).read_text().splitlines():
        if not line.startswith("#"):
            break
        k, _, v = line[1:].strip().partition(":")
        if k.strip() == key:
            vals.append(v.strip())
    return vals


def broken_files():
    return sorted((HERE / "broken").glob("*.yaml"))
