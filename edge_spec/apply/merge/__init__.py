"""The structural merge: place a lazy edit snippet's hunks into the original, each with a verdict.

`structural.py` drives it; the helpers split the snippet at its markers (`markers`), anchor
hunks on lines (`anchors`, `pins`) and on the syntax tree (`syntax`, `structure`), settle their
open edges (`edges`, with `context`, `outer` and `frame`), place them (`placement`) and give the reasons a placement is not sure
(`doubts`). `naive` is the reference a model drafts from when no merge applies.
"""

from edge_spec.apply.merge.structural import (
    Edit,
    HunkStatus,
    HunkVerdict,
    MergeResult,
    assemble,
    detect_language,
    split_original,
    structural_merge,
)

__all__ = [
    "Edit",
    "HunkStatus",
    "HunkVerdict",
    "MergeResult",
    "assemble",
    "detect_language",
    "split_original",
    "structural_merge",
]
