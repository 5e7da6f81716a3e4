"""The components' facts for the tool scripts (tools/common.sh reads them with the project's Python):

    python -m generator.components tools   # per tool: name, pin, required|optional[, module, package, ldflags]
    python -m generator.components crds    # per component: module, version, globs of its CRDs
"""

from __future__ import annotations

import sys

from generator.components import COMPONENTS


def main(argv: list[str]) -> int:
    if argv == ["tools"]:
        print("\n".join(line for facts in COMPONENTS.values() for line in facts.tool_lines()))
    elif argv == ["crds"]:
        print("\n".join(facts.crd_line() for facts in COMPONENTS.values() if facts.crds))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
