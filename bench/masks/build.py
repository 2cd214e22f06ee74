"""build_mask: validate a mask request, resolve its parameters, run the pattern's generator."""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Mapping, Sequence

from magi_attention.common import AttnSlice

from . import _validate
from .mask import Mask
from .registry import MASK_NAMES, PATTERNS


def check_params(name: str, params: Mapping[str, Any]) -> None:
    """Check a mask request's pattern and parameter names before any mask is built (a config
    layer calls it at compose time; values that depend on seqlen are checked by build_mask).

    Raises:
        ValueError: an unknown pattern, or a parameter the pattern does not take (named).
    """
    if name not in PATTERNS:
        raise ValueError(f"unknown mask {name!r}; known masks: {', '.join(MASK_NAMES)}")
    _validate.check_param_names(name, params, PATTERNS[name].defaults)


def build_mask(name: str, seqlen: int, doc_lens: Sequence[int] | None = None, seed: int = 0,
               **params: Any) -> Mask:
    """Build mask pattern ``name`` over ``seqlen`` tokens.

    Args:
        name: one of ``MASK_NAMES`` (definitions in shared/MASKS.md).
        seqlen: S = seqlen_q = seqlen_k.
        doc_lens: document lengths summing to S; required by the document patterns
            (full_document, causal_document, share_question, causal_blockwise,
            prefix_lm_document, block_causal_document), checked and ignored by the others.
        seed: every random choice (prefix length, dropped spans, buckets, kept blocks, block
            sizes) derives from it.
        **params: pattern parameters; omitted ones take MASKS.md defaults
            (``PATTERNS[name].defaults``).

    Returns:
        Mask with its slices and the resolved parameters (seed and random draws included).

    Raises:
        ValueError: unknown name or parameter, a value out of range, doc_lens missing or not
            summing to seqlen; the message names the argument and the value.

    Example:
        >>> build_mask("sliding_window_causal", 4096, window=256).area
        1019776.0
    """
    check_params(name, params)
    pattern = PATTERNS[name]
    seqlen = _validate.check_seqlen(seqlen)
    seed = _validate.check_seed(seed)
    doc_lens = _validate.check_doc_lens(doc_lens, seqlen)
    if pattern.needs_docs and doc_lens is None:
        raise ValueError(f"mask {name!r} needs doc_lens (document lengths summing to "
                         f"seqlen={seqlen}); sample them with bench.data, got None")
    resolved = {**pattern.defaults, **params}
    _validate.check_values(name, seqlen, doc_lens, resolved)
    resolved["seed"] = seed
    if pattern.resolve is not None:
        resolved.update(pattern.resolve(seqlen, doc_lens, resolved))
    docs = doc_lens if pattern.needs_docs else None
    made = pattern.slices(seqlen, docs, resolved)
    if pattern.per_head:
        heads = tuple(tuple(h) for h in made)
        slices, head_slices = heads[0], (heads if len(heads) > 1 else None)
    else:
        slices, head_slices = tuple(made), None
    return Mask(name=name, seqlen=seqlen, slices=slices, head_slices=head_slices, doc_lens=docs,
                params=MappingProxyType(resolved))


def mask_from_slices(slices: Sequence[AttnSlice], seqlen: int,
                     doc_lens: Sequence[int] | None = None, name: str = "custom",
                     head_slices: Sequence[Sequence[AttnSlice]] | None = None) -> Mask:
    """A ``Mask`` from your own AttnSlice list, for the CP strategies and kernel adapters.

    Args:
        slices: the mask shared by all heads (their union); half-open ranges within
            ``[0, seqlen)``.
        seqlen: S = seqlen_q = seqlen_k.
        doc_lens: document lengths summing to S, for strategies that place documents
            (HybridCP); None: the whole sequence is one document.
        name: the label the mask carries (result rows, messages).
        head_slices: one slice list per KV head instead of ``slices`` (a per-head mask);
            ``slices`` must then be head 0's.

    Raises:
        TypeError: an element that is not an AttnSlice. ValueError: a range past ``seqlen``,
            bad ``doc_lens``, or ``head_slices`` whose head 0 differs from ``slices``.

    Example:
        >>> from magi_attention.common import AttnSlice
        >>> mask = mask_from_slices([AttnSlice.make(0, 64, 0, 64, "causal"),
        ...                          AttnSlice.make(64, 128, 0, 128, "full")], 128)
        >>> mask.area
        10272.0
    """
    seqlen = _validate.check_seqlen(seqlen)
    doc_lens = _validate.check_doc_lens(doc_lens, seqlen)
    heads = [slices] if head_slices is None else list(head_slices)
    checked = tuple(tuple(_check_slice(s, seqlen) for s in head) for head in heads)
    if head_slices is not None and tuple(slices) != checked[0]:
        raise ValueError("slices must equal head_slices[0] for a per-head mask")
    return Mask(name=name, seqlen=seqlen, slices=checked[0],
                head_slices=checked if head_slices is not None else None, doc_lens=doc_lens,
                params=MappingProxyType({}))


def _check_slice(s: Any, seqlen: int) -> AttnSlice:
    if not isinstance(s, AttnSlice):
        raise TypeError(f"slices must be AttnSlice objects, got {type(s).__name__}: {s!r:.100}")
    if s.q_range.end > seqlen or s.k_range.end > seqlen:
        raise ValueError(f"slice {s!r} ends past seqlen={seqlen}")
    return s
