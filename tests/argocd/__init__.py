"""Checks of the rendered Argo CD objects judged by Argo CD's own Go code (projects.py, projectcheck/)."""
