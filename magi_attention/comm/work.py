"""WorkHandle: an in-flight collective; ``wait()`` returns its result once, then refuses."""
from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch


class WorkHandle:
    """Wraps a torch.distributed work object (or None for a finished local op).

    ``wait()`` blocks on the work (on CUDA: makes the current stream wait for it), runs the
    post-processing step (e.g. the scatter-reduce of group_reduce) and returns its result.
    A second ``wait()`` raises RuntimeError: a result consumed twice is a bug in the caller.
    """

    def __init__(self, work, finish: Callable[[], Any], comm_bytes: int, name: str,
                 keep_alive: tuple = ()) -> None:
        self._work = work
        self._finish = finish
        self._keep_alive = keep_alive  # buffers the collective reads or writes until it is done
        self.comm_bytes = comm_bytes
        self.name = name
        self._done = False

    def wait(self):
        if self._done:
            raise RuntimeError(f"{self.name}: wait() called twice on the same work handle")
        self._done = True
        with nvtx_range(f"{self.name}.wait"):
            if self._work is not None:
                self._work.wait()
            result = self._finish()
        self._keep_alive = ()
        return result

    @property
    def done(self) -> bool:
        return self._done


@contextlib.contextmanager
def nvtx_range(name: str):
    """An NVTX range on CUDA (visible in nsys), nothing elsewhere."""
    if torch.cuda.is_available():
        torch.cuda.nvtx.range_push(name)
        try:
            yield
        finally:
            torch.cuda.nvtx.range_pop()
    else:
        yield


@contextlib.contextmanager
def on_stream(stream):
    """Run the block on ``stream`` (a CUDA side stream that first waits for the current one)."""
    if stream is None:
        yield
        return
    stream.wait_stream(torch.cuda.current_stream(stream.device))
    with torch.cuda.stream(stream):
        yield
