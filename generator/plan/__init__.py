"""`gpugen plan`: what an inventory change does to the cluster. `changes.py` is pure (two rendered trees compared,
risks flagged, text and Markdown); `gitfiles.py` reads the base tree at a git revision."""
