"""The command line of ``python -m MODULE`` for tests that run a CLI in a subprocess, with one
change that saves most of their time: the libraries the CLIs import are imported first and the
objects they made are frozen out of the cyclic garbage collector (``gc.freeze``).

The sweeps collect garbage before every cell and every timing (``bench.sweep.free_memory``,
``magi_attention.timing.settle``). Over torch's imports one collection takes ~0.2 s on a CI
core: 75 s of a 2-rank CP test sweep's 106 s went to 296 of them. Frozen, they scan only what
the run made. Nothing else changes: the module runs as ``__main__`` with its own arguments, as
under ``-m``. (`python -m` itself is what users run; tests/test_cli_launch.py checks the two
agree.)
"""
from __future__ import annotations

import sys

PRELOAD = ("torch", "pandas", "hydra", "omegaconf", "bench.sweep")
_CODE = ("import gc, runpy, {preload}; gc.freeze(); "
         "runpy.run_module({module!r}, run_name='__main__', alter_sys=True)")


def python_m(module: str) -> list[str]:
    """argv for ``python -m module`` with the imports frozen; append the module's arguments."""
    return [sys.executable, "-c", _CODE.format(preload=", ".join(PRELOAD), module=module)]


def torchrun(nproc: int, module: str) -> list[str]:
    """argv for ``torchrun --standalone --nproc-per-node nproc -m module``, each rank started
    as ``python_m`` starts it; append the module's arguments."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc-per-node", str(nproc), "--no-python", *python_m(module)]
