"""Schedule composition: what overlaps what, from the order of posts, kernels and waits."""
from __future__ import annotations

import pytest

from bench.cp.predict.baselines import head_context_programs
from bench.cp.predict.links import NETWORK, NVLINK, LinkModel, Topology
from bench.cp.predict.ops import ALL_GATHER, ALL_TO_ALL, Collective, Kernel, Memory, P2P, Wait
from bench.cp.predict.problem import CPProblem
from bench.cp.predict.schedule import simulate
from bench.masks import build_mask
from magi_attention.common.slice_array import SliceArray

LINKS = LinkModel(nvlink_gb_per_s=1.0, network_gb_per_s=0.1, nvlink_latency_us=0.0,
                  network_latency_us=0.0)  # 1000 bytes a us on NVLink, 100 on the network
NODE = Topology(gpus_per_node=8)


def _kernel(us: float) -> Kernel:
    """A call whose cost the test's rate function reads from its q rows."""
    return Kernel(SliceArray.empty(), int(us), 1, 1)


def _run(programs, topology=NODE):
    return simulate(programs, lambda k: float(k.seqlen_q), lambda m: m.nbytes / 1000.0, LINKS,
                    topology)


def _exchange(rank: int, peer: int, nbytes: int, handle: str = "x") -> P2P:
    return P2P(handle, ((peer, nbytes),), ((peer, nbytes),), tag=1)


def test_compute_runs_back_to_back():
    timeline = _run([[_kernel(30), Memory(20_000), _kernel(50)]])
    assert timeline.step_us == pytest.approx(100.0)
    assert timeline.exposed_us == pytest.approx(0.0)


@pytest.mark.parametrize("transfer_bytes,step", [(40_000, 100.0), (150_000, 150.0)])
def test_an_exchange_hides_behind_the_kernel_posted_after_it(transfer_bytes, step):
    """Post, kernel of 100 us, wait: the step is the longer of the two."""
    programs = [[_exchange(r, 1 - r, transfer_bytes), _kernel(100), Wait("x")] for r in (0, 1)]
    timeline = _run(programs)
    assert timeline.step_us == pytest.approx(step)
    assert timeline.exposed_us == pytest.approx(step - 100.0)


def test_a_message_starts_when_the_later_end_posts():
    """Rank 1 posts its side after a 70 us kernel: rank 0's wait ends 70 + 50 us in."""
    programs = [[_exchange(0, 1, 50_000), Wait("x")],
                [_kernel(70), _exchange(1, 0, 50_000), Wait("x")]]
    timeline = _run(programs)
    assert timeline.finish_us == pytest.approx((120.0, 120.0))


def test_a_message_across_nodes_takes_the_network():
    topo = Topology(gpus_per_node=1)
    programs = [[_exchange(r, 1 - r, 10_000), Wait("x")] for r in (0, 1)]
    assert _run(programs, topo).step_us == pytest.approx(10_000 / 100)
    assert topo.link(0, 1) == NETWORK and NODE.link(0, 1) == NVLINK


def test_a_collective_starts_when_its_last_member_posts():
    """All-to-all of 10 kB from each to each of 3 ranks; rank 2 posts 40 us late."""
    group = (0, 1, 2)

    def a2a(r):
        return Collective("a", ALL_TO_ALL, group, tuple((d, 10_000) for d in group if d != r))
    programs = [[a2a(0), Wait("a")], [a2a(1), Wait("a")], [_kernel(40), a2a(2), Wait("a")]]
    # each rank sends and receives 20 kB over NVLink: 20 us after the last post
    assert _run(programs).finish_us == pytest.approx((60.0, 60.0, 60.0))


def test_ring_collective_time_is_n_minus_1_blocks():
    group = (0, 1, 2, 3)
    programs = [[Collective("g", ALL_GATHER, group, (), block_bytes=5_000), Wait("g")]
                for _ in group]
    assert _run(programs).step_us == pytest.approx(3 * 5_000 / 1000)


def test_a_wait_for_a_peer_that_never_posts_is_a_deadlock():
    with pytest.raises(RuntimeError, match="deadlock"):
        _run([[_exchange(0, 1, 100), Wait("x")], [_kernel(1)]])


def test_ring_steps_overlap_the_next_blocks_exchange():
    """Ring P2P on a full mask at cp 4 with unit rates: each rank runs 4 step kernels and 3
    exchanges, each exchange beside a step; with cheap links the step time is the compute."""
    problem = CPProblem(build_mask("full", 64), 4, 4, 2, 8)
    programs = head_context_programs(problem, 1, 4, "fwd")
    kernels = [op for op in programs[0] if isinstance(op, Kernel)]
    exchanges = [op for op in programs[0] if isinstance(op, P2P)]
    assert len(kernels) == 4 and len(exchanges) == 3
    fast = LinkModel(nvlink_gb_per_s=1e6, network_gb_per_s=1e6, nvlink_latency_us=0.0,
                     network_latency_us=0.0)
    timeline = simulate(programs, lambda k: 100.0, lambda m: 0.0, fast, NODE)
    assert timeline.step_us == pytest.approx(400.0)
    slow = LinkModel(nvlink_gb_per_s=1e-3, network_gb_per_s=1e-3, nvlink_latency_us=0.0,
                     network_latency_us=0.0)  # 1 byte a us: each exchange outlasts its kernel
    block = exchanges[0].sends[0][1]
    timeline = simulate(programs, lambda k: 100.0, lambda m: 0.0, slow, NODE)
    assert timeline.step_us == pytest.approx(3 * block + 100.0)
