"""Checks of the rendered Argo CD objects judged by Argo CD's own Go code (projects.py gathers the input of
tests/oracles/projectcheck)."""
