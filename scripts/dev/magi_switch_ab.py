"""Interleaved A/B of MagiAttention's runtime switches on one launch: each mask's config
strategies (e.g. magi and hybrid_cp) plus magi again with one switch flipped, all timed in turn,
round after round (cp_ab.py's way), so each variant's ratio to the same baseline comes from one
run.

    torchrun --nproc-per-node 2 scripts/dev/magi_switch_ab.py --out $OUT --rounds 5 -- \\
        experiment=cp_h200x2 hardware=h200 local_kernel=triton 'cp=[magi,hybrid_cp]' \\
        'mask=[causal_document,full_document]' 'seqlen_per_gpu=[16384]' 'cp_sizes=[2]'

Variants (labels): magi's own key with runtime switches set while it is timed (``magi`` itself
with every switch off; ``SWITCHED``: ``magi_early`` early_reduce, ``magi_gather`` gather_first,
``magi_copy`` one_copy, ``magi_gather_copy`` both). ``--nopads`` adds a key built with
MAGI_ATTENTION_KV_PADS off (``magi_nopads``); ``--prio`` (NCCL only) times magi's key with every
switch on (``magi_all``) and a key over a process group whose NCCL stream is high-priority, its
runtime's collectives stream too, with no switch (``magi_prio``) and every one
(``magi_prio_all``) instead of ``SWITCHED``. ``magi`` runs with one_copy off although the
library now turns it on, but under ``--grid``: then ``magi`` has one_copy on and the variants
(``GRID``) set ``copy_programs_per_sm`` (the own KV's copy on a strided grid) or
``copy_engine`` (the own KV's copy by the copy engines); under ``--early`` the same ``magi``
against ``magi_early_start`` (the Gluon forward launched before the cast lands, on magi's own
key: where that key's cast lands in pieces the rank runs as magi; ``cp_ab.py`` with
``'cp=[magi,magi_early,hybrid_cp]'`` times the key built for it, whose cast lands in one
region); ``pair_gather`` (the cast's k and v
by one row kernel) was a variant in session 45's runs, removed after them. Correctness is the
NCCL test's job (tests/magi_attention/api/test_magi_attn_nccl.py); nothing is gated here.
Rows: ``magi_switch_ab.csv`` as cp_ab.csv.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cp_ab import build, load_config, parse_args, run, summary, timed_rounds  # noqa: E402

from bench.cp.local_kernel import LocalKernel  # noqa: E402
from bench.cp.runner import build_strategy, timed_call  # noqa: E402
from bench.problem import make_inputs  # noqa: E402
from bench.sweep import cell_mask  # noqa: E402
from magi_attention import env  # noqa: E402


def _high_priority_group(size: int):
    """A new group over ranks 0..size-1 whose NCCL kernels run on a high-priority stream."""
    options = dist.ProcessGroupNCCL.Options()
    options.is_high_priority_stream = True
    return dist.new_group(list(range(size)), pg_options=options)


OFF = {"early_reduce": False, "comm_priority": False, "gather_first": False, "one_copy": False,
       "copy_programs_per_sm": 0, "copy_engine": False}
ALL = {"early_reduce": True, "gather_first": True, "one_copy": True}
SWITCHED = {"magi_early": {"early_reduce": True}, "magi_gather": {"gather_first": True},
            "magi_copy": {"one_copy": True},
            "magi_gather_copy": {"gather_first": True, "one_copy": True}}
# --prio: magi's own key with every switch, and a key over a high-priority NCCL group
PRIO_SWITCHED = {"magi_all": ALL}
PRIO = {"magi_prio": {"comm_priority": True}, "magi_prio_all": {**ALL, "comm_priority": True}}
# --grid: magi with one_copy on (the library's default) against the own KV's copy on a strided
# grid of a few programs an SM, and the own KV's copy by the copy engines (no SM)
GRID_BASE = {**OFF, "one_copy": True}
GRID = {"magi_grid8": {"copy_programs_per_sm": 8}, "magi_ce": {"copy_engine": True}}
# --early: magi as the library runs it against the Gluon forward launched before the cast
# lands (needs one hardware queue: bench.cp's default)
EARLY = {"magi_early_start": {"early_start": True}}
OPTIONS = {"--nopads": False, "--prio": False, "--grid": False, "--early": False}
_groups: dict = {}


def _variants(config, choice, device, group):
    """[(label, strategy, local, runtime attributes set while it is timed)]."""
    hw, cp_size = config.hardware, config.cp_sizes[0]
    labels, built = build(config, device, group, choice)
    entries = [(label, s, local, {}) for label, (s, local) in zip(labels, built)]
    magi = next(((spec, s, local) for spec, (s, local) in zip(config.strategies, built)
                 if spec.name == "magi"), None)
    if magi is None:
        return entries
    spec, strategy, local = magi
    prio = OPTIONS["--prio"] and dist.get_backend() == "nccl"
    grid_base = OPTIONS["--grid"] or OPTIONS["--early"]
    base = {**GRID_BASE, "early_start": False} if grid_base else OFF
    switched = (GRID if OPTIONS["--grid"] else EARLY if OPTIONS["--early"]
                else PRIO_SWITCHED if prio else SWITCHED)
    entries = [(label, s, loc, base if s is strategy else {}) for label, s, loc, _ in entries]
    entries += [(label, strategy, local, {**base, **on}) for label, on in switched.items()]
    mask = cell_mask(choice, config.seqlen_per_gpu[0] * cp_size, config.data, hw.num_heads_kv)
    inputs = make_inputs(config.shapes(mask.seqlen), device, seed=config.seed)
    kernel = LocalKernel(backend=config.local_kernel)

    def again(variants: dict, group_, **switches):
        saved = {name: getattr(env, name) for name in switches}
        try:
            for name, value in switches.items():
                setattr(env, name, value)
            s = build_strategy(spec, mask, group_, hw, kernel)
        finally:
            for name, value in saved.items():
                setattr(env, name, value)
        shards = [s.shard(t[0]) for t in (inputs.q, inputs.k, inputs.v, inputs.dout)]
        entries.extend((label, s, shards, {**OFF, **on}) for label, on in variants.items())
        if dist.get_rank() == 0:
            print(f"{choice.label} {','.join(variants)}: {s.notes}", flush=True)

    if OPTIONS["--nopads"]:
        again({"magi_nopads": {}}, group, KV_PADS=False)
    if prio:
        if "prio" not in _groups:  # one group for every mask (each rank makes it alike)
            _groups["prio"] = _high_priority_group(cp_size)
        again(PRIO, _groups["prio"])
    return entries


def _mask_rounds(config, choice, rounds, write, device, comm_device, group) -> dict:
    entries = _variants(config, choice, device, group)
    calls = []
    for label, strategy, local, attrs in entries:
        _set(strategy, attrs)  # the backward's graph is recorded under the variant's switches
        calls.append({d: timed_call(strategy, local, d) for d in config.directions})
    return timed_rounds(config, choice, [e[0] for e in entries], calls, rounds, write,
                        comm_device, group, before=lambda i: _set(entries[i][1], entries[i][3]))


def _set(strategy, attrs: dict) -> None:
    runtime = getattr(getattr(strategy, "key", None), "runtime", None)
    for name, value in attrs.items():
        setattr(runtime, name, value)


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    for flag in OPTIONS:
        OPTIONS[flag] = flag in argv
    args = parse_args([a for a in argv if a not in OPTIONS], __doc__.splitlines()[0])
    times = run(load_config(args.overrides), args.rounds, args.out, _mask_rounds,
                name="magi_switch_ab")
    if times:  # rank 0
        print("\n".join(summary(times)))


if __name__ == "__main__":
    main()
