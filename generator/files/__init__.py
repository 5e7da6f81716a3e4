"""Files: compare rendered output with what is on disk, and replace it all or nothing.

Kapitan's approach: write the whole tree into a sibling temporary directory, then swap it in, so stale
files disappear without a separate prune step and a failure never leaves a half-written tree. Files whose
content did not change are hard-linked into the new tree rather than rewritten, so they keep their inode
and mtime: after a one-group edit only that group's files look new. A render that changes nothing touches
nothing.

What makes "all or nothing" hold under faults and concurrency:
- `output_lock` takes an exclusive flock on the directories that hold the outputs (shared for --check), so
  two renders of one output serialise; the existing tree is read only under the lock, and a hard link is
  made only from a file whose (inode, size, mtime) is still what was read.
- every write is checked (short writes retried, 0 bytes is an error), then the file system is synced
  before anything is swapped in; a failure removes the staging copies and leaves the old outputs as they were.
- trees are swapped with renameat2(RENAME_EXCHANGE) where the OS offers it, so no moment exists at which
  the output is missing; all outputs are staged first and swapped together, an error rolls back the swaps
  already made.
- output paths are resolved first: a symlinked output is written through (its target is replaced), never
  replaced by a directory; outputs that coincide or nest, or that would swallow the inventory, are refused.
- leftovers of a killed render (staging and retired copies, always named `.<output>.gpugen-*`) are removed
  by the next run under the lock.

By job: fs (checked system calls, the one temp-then-replace helper shared with `inventory edit`), paths (which
outputs may be written), lock (the lock and a killed run's leftovers), scan (what is on disk now) and staging
(stage, swap, roll back).
"""
