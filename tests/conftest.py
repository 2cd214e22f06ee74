import gc
import importlib.util
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))  # _cli (--import-mode=importlib adds no test dir)


def pytest_collection_modifyitems(config, items):
    # Long modules (marker slow) and the Slurm tests (mostly waiting on daemons) first: under
    # scripts/test.sh's `-n 3 --dist loadfile --no-loadscope-reorder` the workers take whole
    # files in this order, so the longest start first and the workers finish together.
    items.sort(key=lambda item: not ("slow" in item.keywords or "slurm" in item.keywords))
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU; run on the device machine")
    for item in items:
        if "gpu" in item.keywords or "multigpu" in item.keywords:
            item.add_marker(skip_gpu)


def pytest_collection_finish(session):
    # What the collected modules imported (torch, pandas, hydra, ...) stays until the end:
    # frozen out of the cyclic collector, each gc.collect of the code under test (one before
    # every cell and timing, bench.sweep.free_memory, magi_attention.timing.settle) scans only
    # what the tests made since, not ~0.2 s of torch's objects (tests/_cli.py does the same in
    # the CLIs' subprocesses).
    gc.freeze()


@pytest.fixture(scope="session")
def load_script():
    """``load_script("tools/x.py")``: a repository script (not a package module) loaded
    as a module, for tests of its CPU parts."""
    def load(relpath: str):
        path = ROOT / relpath
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    return load


class _Cycle:
    """An object in a reference cycle: only the garbage collector frees it."""

    freed = 0

    def __init__(self):
        self.me = self

    def __del__(self):
        _Cycle.freed += 1


@pytest.fixture
def leftover_garbage():
    """One object in a reference cycle, left as garbage with the automatic collector off (as
    the garbage of what ran before a timing); the fixture's value tells whether it was freed.
    For timings that must collect it first (bench.metrics, the key's timed choices)."""
    enabled = gc.isenabled()
    gc.disable()
    _Cycle.freed = 0
    _Cycle()
    try:
        yield lambda: _Cycle.freed == 1
    finally:
        if enabled:
            gc.enable()
        gc.collect()


@pytest.fixture
def ctrl_c_raises():
    """Ctrl-C raises KeyboardInterrupt in this process, as in a terminal, even where the test
    run inherited SIGINT ignored (a job started in the background by a non-interactive shell);
    the fixture's value is for subprocess.Popen(preexec_fn=...), so a child starts the same."""
    import signal
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.fixture
def result_row():
    """One ok kernel row (bench.results.ResultRow) to vary with dataclasses.replace."""
    from bench.results import ResultRow
    return ResultRow(run_id="r", time="2026-01-01T00:00:00+00:00", git_sha="abc1234",
                     hardware="cpu", gpu_name="cpu", torch_version="2", kernel_version="v",
                     kernel="naive", mask="causal", seqlen=64, batch=1, num_heads_q=2,
                     num_heads_kv=1, head_dim=16, dtype="float32", direction="fwd", cp_size=1,
                     mask_area=2080.0, flops=1e6, runtime_ms=1.0, tflops_per_s=0.001,
                     peak_mem_gb=None, build_ms=None, status="ok", message="", env="")
