"""Programs of the six baselines, written from their own layouts, ring plans and placements.

Each builder mirrors its strategy's ``attention`` (forward) or autograd backward op for op:
the same layouts (``bench.cp._sharding``: zigzag per document, two-level head x context),
the same ring plans (``RingPlan.source`` and ``RingPlan.comms``: who holds which KV block at
each step, who sends to whom on which tag), HybridCP's own placement (``place_documents``),
and the same bytes on the wire (padded all-gather blocks, fp32 dK/dV on the rings). Ring step
masks are the global mask clipped to (rows) x (the KV block in hand), as ``local_slices``
makes them (``submask.local_mask``). Elementwise passes the strategies make between kernels
(merges by lse, fp32 accumulators, stacks and casts) are ``Memory`` ops of the bytes they read
and write.

    programs = head_context_programs(problem, ulysses_degree=2, window_size=None, direction="fwd")
"""
from __future__ import annotations

from dataclasses import dataclass

from .._head_context import kv_head_repeat
from .._ring_engine import RingPlan
from .._sharding import Layout, doc_ranges, layout_len, two_level_layout, zigzag_layout
from .._stats import CommStats
from ..hybrid_cp import place_documents
from .ops import ALL_GATHER, ALL_TO_ALL, REDUCE_SCATTER, Collective, Kernel, Memory, P2P, Program, Wait
from .problem import FP32_BYTES, CPProblem
from .submask import local_mask, sorted_ranges

__all__ = ["head_context_programs", "ring_allgather_programs", "hybrid_cp_programs"]

# merge_out_lse's fused pass reads both partial outputs and writes the merged one; its lse
# traffic (3 fp32 values a row and head) is added beside it
LSE_PASSES = 3


@dataclass
class _Ring:
    """One rank's ring: its plan, the member layouts (q and KV alike) and the step masks."""

    plan: RingPlan
    members: list[Layout]
    problem: CPProblem
    heads_q: int
    heads_kv: int
    stage: str = ""

    def __post_init__(self) -> None:
        self.masks = {}
        self.sorted: dict[int, tuple] = {}  # members' sorted_ranges, for the clips
        self.q_len = self.plan.kv_lengths[self.plan.my_index]

    def kv_bytes(self, member: int, element_size: int) -> int:
        return 2 * self.problem.nbytes(self.plan.kv_lengths[member], self.heads_kv, element_size)

    def step_mask(self, member: int):
        if member not in self.masks:
            mine = self.plan.my_index
            for m in (mine, member):
                if m not in self.sorted:
                    self.sorted[m] = sorted_ranges(self.members[m])
            self.masks[member] = local_mask(self.problem.slices, self.sorted[mine],
                                            self.sorted[member])
        return self.masks[member]

    def kernel(self, member: int, label: str) -> Kernel | None:
        mask = self.step_mask(member)
        if len(mask) == 0:
            return None
        return Kernel(mask, self.q_len, self.plan.kv_lengths[member], self.heads_q, label)

    def out_bytes(self, element_size: int) -> int:
        return self.problem.nbytes(self.q_len, self.heads_q, element_size)

    def lse_bytes(self) -> int:
        return self.q_len * self.heads_q * FP32_BYTES


def _exchange(comm, handle: str, send_bytes: int, recv_bytes: int, stage: str) -> P2P:
    return P2P(handle, ((comm.next_rank, send_bytes),), ((comm.prev_rank, recv_bytes),),
               comm.tag, stage)


def ring_fwd_ops(ring: _Ring) -> tuple[Program, str | None]:
    """``_ring_engine.ring_fwd``; returns the ops and the dtype of the out it leaves ("bf16",
    "fp32", or None: no block, fp32 zeros)."""
    plan, e = ring.plan, ring.problem.element_size
    kv_inner, kv_outer, _, _ = plan.comms(CommStats(), "fwd")
    ops: Program = [Memory(2 * ring.kv_bytes(plan.my_index, e), "stack k, v", ring.stage)]
    out_dtype = None
    for o in range(plan.num_windows):
        if o + 1 < plan.num_windows:
            ops.append(_exchange(kv_outer, f"kv outer {o}", ring.kv_bytes(plan.source(o, 0), e),
                                 ring.kv_bytes(plan.source(o + 1, 0), e), ring.stage))
        for j in range(plan.window_size):
            if j + 1 < plan.window_size:
                ops.append(_exchange(kv_inner, f"kv inner {o}.{j}",
                                     ring.kv_bytes(plan.source(o, j), e),
                                     ring.kv_bytes(plan.source(o, j + 1), e), ring.stage))
            call = ring.kernel(plan.source(o, j), f"{ring.stage}step {o * plan.window_size + j}")
            if call is not None:
                ops.append(call)
                if out_dtype is not None:  # merged into an fp32 accumulator
                    read = ring.out_bytes(FP32_BYTES if out_dtype == "fp32" else e)
                    ops.append(Memory(read + ring.out_bytes(e) + ring.out_bytes(FP32_BYTES)
                                      + LSE_PASSES * ring.lse_bytes(), "merge", call.stage))
                    out_dtype = "fp32"
                else:
                    out_dtype = "bf16"
            if j + 1 < plan.window_size:
                ops.append(Wait(f"kv inner {o}.{j}"))
        if o + 1 < plan.num_windows:
            ops.append(Wait(f"kv outer {o}"))
    if out_dtype is None:  # no key visible to these rows: zeros and -inf
        ops.append(Memory(ring.out_bytes(FP32_BYTES) + ring.lse_bytes(), "empty out", ring.stage))
    return ops, out_dtype


def ring_bwd_ops(ring: _Ring) -> tuple[Program, bool]:
    """``_ring_engine.ring_bwd`` up to its last casts; returns the ops and whether dq ended
    in an fp32 accumulator."""
    plan, e = ring.plan, ring.problem.element_size
    kv_inner, kv_outer, dkv_inner, dkv_outer = plan.comms(CommStats(), "bwd")
    travels = len(plan.ring_ranks) > 1
    acc = FP32_BYTES if travels else e
    ops: Program = [Memory(2 * ring.kv_bytes(plan.my_index, e), "stack k, v", ring.stage)]
    dq = None
    for o in range(plan.num_windows):
        if o + 1 < plan.num_windows:
            ops.append(_exchange(kv_outer, f"kv outer {o}", ring.kv_bytes(plan.source(o, 0), e),
                                 ring.kv_bytes(plan.source(o + 1, 0), e), ring.stage))
        for j in range(plan.window_size):
            member = plan.source(o, j)
            if j + 1 < plan.window_size:
                ops.append(_exchange(kv_inner, f"kv inner {o}.{j}", ring.kv_bytes(member, e),
                                     ring.kv_bytes(plan.source(o, j + 1), e), ring.stage))
            stage = f"{ring.stage}step {o * plan.window_size + j}"
            call = ring.kernel(member, stage)
            block = ring.kv_bytes(member, e)
            if call is None:
                ops.append(Memory(ring.kv_bytes(member, acc), "zero dkv", stage))
            else:
                ops += [call, Memory(2 * block, "stack dk, dv", stage)]
                if travels:
                    ops.append(Memory(block + ring.kv_bytes(member, FP32_BYTES), "dkv fp32", stage))
                if dq is not None:
                    upcast = ring.out_bytes(e) + ring.out_bytes(FP32_BYTES) if dq == "bf16" else 0
                    ops.append(Memory(upcast + 2 * ring.out_bytes(FP32_BYTES) + ring.out_bytes(e),
                                      "dq add", stage))
                dq = "fp32" if dq is not None else "bf16"
            if j > 0:
                ops += [Wait(f"dkv inner {o}.{j - 1}"),
                        Memory(3 * ring.kv_bytes(member, FP32_BYTES), "dkv add", stage)]
            if plan.window_size > 1:
                ops.append(_exchange(dkv_inner, f"dkv inner {o}.{j}",
                                     ring.kv_bytes(member, FP32_BYTES),
                                     ring.kv_bytes(plan.source(o, j + 1), FP32_BYTES), stage))
            if j + 1 < plan.window_size:
                ops.append(Wait(f"kv inner {o}.{j}"))
        if plan.window_size > 1:
            ops.append(Wait(f"dkv inner {o}.{plan.window_size - 1}"))
        if plan.num_windows > 1:
            held = ring.kv_bytes(plan.source(o, 0), FP32_BYTES)
            if o > 0:
                ops += [Wait(f"dkv outer {o - 1}"), Memory(3 * held, "dkv add", ring.stage)]
            ops.append(_exchange(dkv_outer, f"dkv outer {o}", held,
                                 ring.kv_bytes(plan.source(o + 1, 0), FP32_BYTES), ring.stage))
        if o + 1 < plan.num_windows:
            ops.append(Wait(f"kv outer {o}"))
    if plan.num_windows > 1:
        ops.append(Wait(f"dkv outer {plan.num_windows - 1}"))
    if travels:  # dkv[0].to(k.dtype), dkv[1].to(v.dtype)
        own = ring.kv_bytes(plan.my_index, e)
        ops.append(Memory(own + ring.kv_bytes(plan.my_index, FP32_BYTES), "dk, dv cast", ring.stage))
    if dq is None:
        ops.append(Memory(ring.out_bytes(e), "zero dq", ring.stage))
    elif dq == "fp32":
        ops.append(Memory(ring.out_bytes(FP32_BYTES) + ring.out_bytes(e), "dq cast", ring.stage))
    return ops, dq == "fp32"


def _ring_of(problem: CPProblem, members: list[Layout], ring_ranks: list[int], my_index: int,
             window_size: int, heads_q: int, heads_kv: int, stage: str = "",
             lengths: list[int] | None = None) -> _Ring:
    """``lengths``: the members' token counts, when the caller has them (one ring group's ranks
    share them)."""
    lengths = lengths if lengths is not None else [layout_len(m) for m in members]
    plan = RingPlan(None, ring_ranks, my_index, window_size, lengths, [])
    return _Ring(plan, members, problem, heads_q, heads_kv, stage)


# -- Ulysses, Ring P2P, USP, LoongTrain: bench.cp._head_context.HeadContextParallel ----------
def _all_to_all(problem: CPProblem, rank: int, group: list[int], send_rows: list[int],
                heads: int, handle: str, stage: str) -> list:
    """A blocking all_to_all_single of rows of ``heads`` heads: ``send_rows[i]`` to member i."""
    sends = tuple((dst, problem.nbytes(n, heads)) for dst, n in zip(group, send_rows) if dst != rank)
    return [Collective(handle, ALL_TO_ALL, tuple(group), sends, stage=stage), Wait(handle)]


def _seq_to_head(problem, rank, group, lengths, me, heads, name, direction) -> list:
    """``_ulysses._seq_to_head`` of a [lengths[me], heads, D] tensor: the reshape's copy, then
    every member gets this rank's rows of its heads / U."""
    size = len(group)
    copy = Memory(2 * problem.nbytes(lengths[me], heads), f"{name} to heads", "all-to-all")
    return [copy] + _all_to_all(problem, rank, group, [lengths[me]] * size, heads // size,
                                f"a2a {name} {direction}", "all-to-all")


def _head_to_seq(problem, rank, group, lengths, me, heads, name, direction) -> list:
    """``_ulysses._head_to_seq`` of [sum(lengths), heads / U, D]: member i gets its rows, then
    the reshape's copy of [lengths[me], heads, D]."""
    size = len(group)
    return _all_to_all(problem, rank, group, lengths, heads // size, f"a2a {name} {direction}",
                       "all-to-all") + [
        Memory(2 * problem.nbytes(lengths[me], heads), f"{name} to sequence", "all-to-all")]


def head_context_programs(problem: CPProblem, ulysses_degree: int, window_size: int,
                          direction: str) -> list[Program]:
    """Programs of ``HeadContextParallel`` with these degrees (Ulysses: (cp, 1); Ring P2P:
    (1, cp); USP: (u, cp / u); LoongTrain: (u, window)); ``direction`` "fwd" or "bwd"."""
    cp, u_deg = problem.cp_size, ulysses_degree
    ring_degree = cp // u_deg
    docs = doc_ranges(problem.seqlen, problem.mask.doc_lens)
    rank_layouts, group_layouts = two_level_layout(docs, ring_degree, u_deg)
    repeat = kv_head_repeat(problem.num_heads_q, problem.num_heads_kv, u_deg)
    heads_kv = problem.num_heads_kv * repeat
    rings: dict[int, _Ring] = {}  # the step masks of one ring group serve its U ranks
    group_lengths = [layout_len(g) for g in group_layouts]
    programs = []
    for rank in range(cp):
        ring_index, u = divmod(rank, u_deg)
        group = list(range(ring_index * u_deg, (ring_index + 1) * u_deg))
        lengths = [layout_len(rank_layouts[g]) for g in group]
        ring = _ring_of(problem, group_layouts, [i * u_deg + u for i in range(ring_degree)],
                        ring_index, window_size, problem.num_heads_q // u_deg, heads_kv // u_deg,
                        lengths=group_lengths)
        if ring_index in rings:
            ring.masks, ring.sorted = rings[ring_index].masks, rings[ring_index].sorted
        rings[ring_index] = ring
        programs.append(_head_context_program(problem, rank, group, lengths, u, repeat, ring,
                                              direction))
    return programs


def _head_context_program(problem, rank, group, lengths, me, repeat, ring, direction):
    hq, hkv = problem.num_heads_q, problem.num_heads_kv * repeat
    local = lengths[me]
    ops: Program = []
    if direction == "fwd":
        if repeat > 1:  # repeat_interleave of k and v
            ops.append(Memory(2 * (problem.nbytes(local, problem.num_heads_kv)
                                   + problem.nbytes(local, hkv)), "repeat kv", "all-to-all"))
        if len(group) > 1:
            for name, heads in (("q", hq), ("k", hkv), ("v", hkv)):
                ops += _seq_to_head(problem, rank, group, lengths, me, heads, name, direction)
        ring_ops, out_dtype = ring_fwd_ops(ring)
        ops += ring_ops
        if out_dtype != "bf16":  # RingAttnFunc's out.to(q.dtype)
            ops.append(Memory(ring.out_bytes(FP32_BYTES) + ring.out_bytes(problem.element_size),
                              "out cast", ""))
        if len(group) > 1:
            ops += _head_to_seq(problem, rank, group, lengths, me, hq, "out", direction)
        return ops
    if len(group) > 1:  # head_to_seq's backward: dout to heads
        ops += _seq_to_head(problem, rank, group, lengths, me, hq, "dout", direction)
    ring_ops, _ = ring_bwd_ops(ring)
    ops += ring_ops
    if len(group) > 1:
        for name, heads in (("dq", hq), ("dk", hkv), ("dv", hkv)):
            ops += _head_to_seq(problem, rank, group, lengths, me, heads, name, direction)
    if repeat > 1:  # repeat_interleave's backward sums the repeats
        ops.append(Memory(2 * (problem.nbytes(local, hkv) + problem.nbytes(local, problem.num_heads_kv)),
                          "sum repeats", "all-to-all"))
    return ops


# -- Ring all-gather (bench.cp.ring_allgather) ----------------------------------------------
def ring_allgather_programs(problem: CPProblem, direction: str) -> list[Program]:
    cp = problem.cp_size
    layouts = zigzag_layout(doc_ranges(problem.seqlen, problem.mask.doc_lens), cp)
    lengths = [layout_len(layout) for layout in layouts]
    width, seqlen = max(lengths), problem.seqlen
    gathered = [r for layout in layouts for r in layout]
    hq, hkv = problem.num_heads_q, problem.num_heads_kv
    group = tuple(range(cp))
    programs = []
    for rank in range(cp):
        call = Kernel(local_mask(problem.slices, layouts[rank], gathered), lengths[rank], seqlen,
                      hq, "gathered")
        ops: Program = []
        if cp == 1:
            programs.append([call])
            continue
        kv_row = 2 * problem.nbytes(1, hkv)  # k and v of one token
        if direction == "fwd":
            block = width * kv_row
            ops += [Memory(2 * lengths[rank] * kv_row, "stack k, v", "all-gather"),
                    Memory(block + lengths[rank] * kv_row, "pad", "all-gather"),
                    Collective("gather kv", ALL_GATHER, group,
                               tuple((d, block) for d in group if d != rank), block, "all-gather"),
                    Wait("gather kv"),
                    Memory(4 * seqlen * kv_row, "cat, k v contiguous", "all-gather"),
                    call]
        else:
            kv32 = 2 * problem.nbytes(1, hkv, FP32_BYTES)
            block = width * kv32
            ops += [call,
                    Memory(2 * seqlen * kv_row + seqlen * (kv_row + kv32), "stack dk dv, fp32",
                           "reduce-scatter"),
                    Memory(cp * block + 2 * seqlen * kv32, "pad", "reduce-scatter"),
                    Collective("scatter dkv", REDUCE_SCATTER, group,
                               tuple((d, block) for d in group if d != rank), block,
                               "reduce-scatter"),
                    Wait("scatter dkv"),
                    Memory(lengths[rank] * (kv32 + kv_row), "dk, dv cast", "reduce-scatter")]
        programs.append(ops)
    return programs


# -- HybridCP (bench.cp.hybrid_cp) ----------------------------------------------------------
def _hybrid_levels(problem: CPProblem, token_capacity: float | None):
    """Per rank: [(level rows, ring)] as ``HybridCP._build`` / ``_plans`` make them."""
    cp = problem.cp_size
    docs, _, sizes, blocks = place_documents(problem.mask, cp, token_capacity)
    levels = [[] for _ in range(cp)]
    offsets = [0] * cp
    g = cp
    while g >= 1:
        members = [[[] for _ in range(g)] for _ in range(cp // g)]
        for d, size, b in zip(docs, sizes, blocks):
            if size == g:
                for m, part in enumerate(zigzag_layout([d], g)):
                    members[b][m] += part
        for rank in range(cp):
            block, index = divmod(rank, g)
            mine = members[block]
            rows = layout_len(mine[index])
            start = offsets[rank]
            offsets[rank] += rows
            if not any(mine):
                continue
            ring = _ring_of(problem, mine, list(range(block * g, (block + 1) * g)), index, g,
                            problem.num_heads_q, problem.num_heads_kv, stage=f"level {g} ")
            levels[rank].append(((start, start + rows), ring))
        g //= 2
    return levels, offsets


def hybrid_cp_programs(problem: CPProblem, direction: str, token_capacity: float | None = None
                       ) -> list[Program]:
    levels, totals = _hybrid_levels(problem, token_capacity)
    e, hq = problem.element_size, problem.num_heads_q
    programs = []
    for rank in range(problem.cp_size):
        ops: Program = []
        mine = levels[rank]
        if direction == "fwd":
            dtypes = []
            for _, ring in mine:
                ring_ops, out_dtype = ring_fwd_ops(ring)
                ops += ring_ops
                dtypes.append(out_dtype)
            all_bf16 = set(dtypes) == {"bf16"}  # else torch.cat promotes to fp32
            out = problem.nbytes(totals[rank], hq, e if all_bf16 else FP32_BYTES)
            if len(mine) > 1:  # _joined: the levels' outs concatenated
                ops.append(Memory(2 * out, "cat levels", ""))
            if not all_bf16:  # .to(q.dtype)
                ops.append(Memory(out + problem.nbytes(totals[rank], hq), "out cast", ""))
            programs.append(ops)
            continue
        whole = len(mine) == 1 and mine[0][0] == (0, totals[rank])
        if not whole:  # zeros_like dq, dk, dv, then each level's rows copied in
            grads = problem.nbytes(totals[rank], hq) + 2 * problem.nbytes(totals[rank],
                                                                          problem.num_heads_kv)
            ops.append(Memory(grads, "zero grads", ""))
        for (start, end), ring in mine:
            ring_ops, _ = ring_bwd_ops(ring)
            ops += ring_ops
            if not whole:
                rows = end - start
                ops.append(Memory(2 * (problem.nbytes(rows, hq) + 2 * problem.nbytes(
                    rows, problem.num_heads_kv)), "grads into rows", ring.stage))
        programs.append(ops)
    return programs
