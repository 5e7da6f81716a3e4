"""The platform's components: one folder per upstream controller that gpugen installs from its Helm chart or
adopts, each the same shape (CONTRIBUTING.md, "Adding a component"):

    <name>/__init__.py   FACTS (facts.py's ComponentFacts): chart, release, namespace, wave, identity
    <name>/values.py     values(inventory, role): the chart's Helm values (builders layer)
    <name>/settings.py   Settings: its own fields under cluster.components.<name>, when it has any (inventory layer)

Everything else reads the folders: the inventory schema (`cluster.components.<name>`, its default namespace), the
rules (what the rendered tree needs from a component that is neither installed nor declared existing), the
controller identities the policies let through, and the app-of-apps (chart, release, sync wave, the kinds its
AppProject allows, the values).

COMPONENTS is in install order, which is also the order of the inventory's keys and of bootstrap/platform: the one
line a new component adds to outside its folder.
"""

from __future__ import annotations

from generator.components import jobset, kueue, kyverno, trainer
from generator.components.facts import ComponentFacts

COMPONENTS: dict[str, ComponentFacts] = {
    folder.FACTS.name: folder.FACTS for folder in (kyverno, jobset, trainer, kueue)}
