"""Code apply, in the order a request meets it: the plan (prompts, references, budget, output
cleaning), the structural merge (`merge/`), the decode-time guards (`guard/`), the answer check
(`check/`) and apply by region (`region`)."""

from edge_spec.apply.clean import clean_output, lazy_lines
from edge_spec.apply.merge.naive import MARKER, edit_references, naive_merge
from edge_spec.apply.plan import ApplyPlan, ApplyResult, check_policy, plan_apply
from edge_spec.apply.templates import (
    SYSTEM,
    TEMPLATES,
    Template,
    build_messages,
    pick_template,
)
from edge_spec.config.settings import LAZY_POLICIES

__all__ = [
    "LAZY_POLICIES",
    "MARKER",
    "SYSTEM",
    "TEMPLATES",
    "ApplyPlan",
    "ApplyResult",
    "Template",
    "build_messages",
    "check_policy",
    "clean_output",
    "edit_references",
    "lazy_lines",
    "naive_merge",
    "pick_template",
    "plan_apply",
]
