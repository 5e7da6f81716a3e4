"""`gpugen plan`: what an inventory change does to the cluster, pure but for the git read.

    objects.py   a rendered tree read as objects; what the rules read of Kueue's objects
    diff.py      objects added, removed, changed field by field
    risks.py     what a change of each kind risks, one rule a function, in tables per kind
    plans.py     a plan of one tree: its changes and their risks
    clusters.py  several clusters: a plan per cluster, the classes that move between workers
    output/      one module per output format (text, markdown)
    gitfiles.py  the base tree read at a git revision
"""
