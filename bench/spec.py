"""What defines a measured function beyond its label: the ``spec`` column of a result row.

A rerun skips a cell only when its spec (and ``kernel_version``, the measured package's
version) match a done row, so changing what a label measures measures it again: the custom
kernel's target, an adapter option (``kernel.flex.options.compile``), a CP strategy's knobs or
local backend, or the code of an import target. The code is fingerprinted by the source file of
the target's module (not the modules it imports), read without importing it.

    >>> measured_spec("flex", {"compile": "never", "block_size": 128})
    'flex[block_size=128,compile=never]'
"""
from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Mapping
from typing import Any

__all__ = ["measured_spec", "target_fingerprint"]

# options whose value is an import path "pkg.module:attr" to the measured code
TARGET_OPTIONS = ("target",)


def target_fingerprint(target: str) -> str:
    """``sha1:<10 hex>`` of the source file of ``target``'s module, or why there is none."""
    module_name = str(target).partition(":")[0]
    try:
        found = importlib.util.find_spec(module_name)
    except (ImportError, ValueError) as e:  # a missing parent package, an empty name
        return f"not importable ({type(e).__name__})"
    if found is None:
        return "not importable"
    if not found.origin or not found.has_location:
        return "no source file"
    try:
        with open(found.origin, "rb") as f:
            return "sha1:" + hashlib.sha1(f.read()).hexdigest()[:10]
    except OSError as e:
        return f"unreadable ({type(e).__name__})"


def measured_spec(name: str, options: Mapping[str, Any]) -> str:
    """``name[k=v,...]`` over the options set (None values left out), each import target
    followed by its fingerprint: ``custom[target=pkg.mod:fn@sha1:0123456789]``."""
    items = []
    for key in sorted(options):
        value = options[key]
        if value is None:
            continue
        if key in TARGET_OPTIONS:
            value = f"{value}@{target_fingerprint(value)}"
        items.append(f"{key}={value}")
    return f"{name}[{','.join(items)}]" if items else name
