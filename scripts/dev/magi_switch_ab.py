"""Interleaved A/B of MagiAttention's runtime switches on one launch: each mask's config
strategies (e.g. magi and hybrid_cp) plus magi again with one switch flipped, all timed in turn,
round after round (cp_ab.py's way), so each variant's ratio to the same baseline comes from one
run.

    torchrun --nproc-per-node 2 scripts/dev/magi_switch_ab.py --out $OUT --rounds 5 --early -- \\
        experiment=cp_h200x2 hardware=h200 local_kernel=triton 'cp=[magi,hybrid_cp]' \\
        'mask=[causal_document,full_document]' 'seqlen_per_gpu=[16384]' 'cp_sizes=[2]'

Variants (labels): ``--early`` times magi's own key with the runtime's early_start on
(``magi_early_start``: the Gluon forward launched before the cast lands; where that key's cast
lands in pieces the rank runs as magi; ``cp_ab.py`` with ``'cp=[magi,magi_early,hybrid_cp]'``
times the key built for it, whose cast lands in one region); ``--nopads`` adds a key built with
MAGI_ATTENTION_KV_PADS off (``magi_nopads``). With neither, the config's strategies alone, as
cp_ab.py times them. The runtime switches that sessions 43-45 timed here left the library after
them (notes/magi_cp.md). Correctness is the NCCL test's job
(tests/magi_attention/api/test_magi_attn_nccl.py); nothing is gated here. Rows:
``magi_switch_ab.csv`` as cp_ab.csv.
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

OPTIONS = {"--nopads": False, "--early": False}


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
    # --early: magi's own key with early_start on (one hardware queue: bench.cp's default);
    # magi's own rounds turn it off again
    if OPTIONS["--early"]:
        entries = [(label, s, loc, {"early_start": False} if s is strategy else {})
                   for label, s, loc, _ in entries]
        entries.append(("magi_early_start", strategy, local, {"early_start": True}))
    mask = cell_mask(choice, config.seqlen_per_gpu[0] * cp_size, config.data, hw.num_heads_kv)
    inputs = make_inputs(config.shapes(mask.seqlen), device, seed=config.seed)
    kernel = LocalKernel(backend=config.local_kernel)

    def again(variants: dict, **switches):
        saved = {name: getattr(env, name) for name in switches}
        try:
            for name, value in switches.items():
                setattr(env, name, value)
            s = build_strategy(spec, mask, group, hw, kernel)
        finally:
            for name, value in saved.items():
                setattr(env, name, value)
        shards = [s.shard(t[0]) for t in (inputs.q, inputs.k, inputs.v, inputs.dout)]
        entries.extend((label, s, shards, on) for label, on in variants.items())
        if dist.get_rank() == 0:
            print(f"{choice.label} {','.join(variants)}: {s.notes}", flush=True)

    if OPTIONS["--nopads"]:
        again({"magi_nopads": {}}, KV_PADS=False)
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
