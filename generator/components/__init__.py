"""The platform's components: one folder per upstream controller that gpugen installs from its Helm chart or
adopts, each the same shape (CONTRIBUTING.md, "Adding a component"):

    <name>/__init__.py   FACTS (facts.py's ComponentFacts): chart, release, namespace, wave, identity, and what it
                         has of the optional parts (CRDs, metrics, tools, its simulated run, settings, values)
    <name>/values.py     values(cluster): the chart's Helm values, when it sets any
    <name>/settings.py   its own fields under cluster.components.<name>, when it has any

A folder imports only the facts layer (generator.fields, kinds, emit, versions): the inventory schema, the builders,
the rules, the alerts, the simulations and the tests all read it through COMPONENTS, and none of them names a
component.

COMPONENTS is in install order, which is also the order of the inventory's keys and of bootstrap/platform: the one
line a new component adds to outside its folder.
"""

from __future__ import annotations

from generator.components import jobset, kueue, kyverno, trainer
from generator.components.facts import ComponentFacts

COMPONENTS: dict[str, ComponentFacts] = {
    folder.FACTS.name: folder.FACTS for folder in (kyverno, jobset, trainer, kueue)}
