"""What machine a row was measured on, beyond the GPU's name: its clock limits and the driver,
CUDA and library versions, so that a reader can tell two runs on "the same" GPU apart.

Two result columns, each ``key=value`` pairs joined by ``;`` (empty fields left out):

- ``gpu_clocks``: the SM and memory clock limits and the power limit as the driver reports them
  (``nvidia-smi``): ``sm_max_mhz``, ``mem_max_mhz``, ``sm_app_mhz`` (the application clock the
  driver boosts towards), ``power_limit_w``. Empty on a machine without an NVIDIA GPU.
- ``versions``: ``driver``, ``cuda`` (torch's), ``torch``, ``triton``, ``cudnn`` (the library
  torch loads), and each peer package found: ``flash_attn_4``, ``cudnn_frontend``, ``fa3_fwd``,
  ``flashinfer``, ``flash_attn`` (FA2).

Read once per process; nothing here imports a peer package (package metadata only).
"""
from __future__ import annotations

import functools
import importlib.metadata
import shutil
import subprocess

import torch

__all__ = ["PEER_DISTRIBUTIONS", "gpu_clocks", "versions", "parse_pairs"]

# result key -> the pip distribution that provides it
PEER_DISTRIBUTIONS = {
    "triton": "triton",
    "flash_attn_4": "flash-attn-4",
    "cudnn_frontend": "nvidia-cudnn-frontend",
    "fa3_fwd": "fa3-fwd",
    "flashinfer": "flashinfer-python",
    "flash_attn": "flash-attn",
}
_SMI_FIELDS = {"clocks.max.sm": "sm_max_mhz", "clocks.max.mem": "mem_max_mhz",
               "clocks.applications.graphics": "sm_app_mhz", "power.limit": "power_limit_w",
               "driver_version": "driver"}
_SMI_TIMEOUT_S = 10


def _join(pairs: dict[str, str]) -> str:
    return ";".join(f"{k}={v}" for k, v in pairs.items() if v not in (None, ""))


def parse_pairs(text: str) -> dict[str, str]:
    """``"a=1;b=2"`` -> ``{"a": "1", "b": "2"}`` (the inverse of how the columns are written)."""
    return dict(item.split("=", 1) for item in str(text or "").split(";") if "=" in item)


@functools.lru_cache(maxsize=1)
def _nvidia_smi() -> dict[str, str]:
    """The first visible GPU's fields of ``_SMI_FIELDS`` ({} without nvidia-smi or a GPU)."""
    if shutil.which("nvidia-smi") is None or not torch.cuda.is_available():
        return {}
    index = torch.cuda.current_device()
    query = ",".join(_SMI_FIELDS)
    try:
        out = subprocess.run(["nvidia-smi", f"--id={index}", f"--query-gpu={query}",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=_SMI_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return {}
    if out.returncode != 0 or not out.stdout.strip():
        return {}
    values = [v.strip() for v in out.stdout.strip().splitlines()[0].split(",")]
    return {name: value for name, value in zip(_SMI_FIELDS.values(), values)
            if value and "N/A" not in value and "Not Supported" not in value}


@functools.lru_cache(maxsize=1)
def gpu_clocks() -> str:
    """The ``gpu_clocks`` column of this process's rows."""
    smi = _nvidia_smi()
    return _join({k: smi.get(k, "") for k in ("sm_max_mhz", "mem_max_mhz", "sm_app_mhz",
                                              "power_limit_w")})


def _distribution_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ""


@functools.lru_cache(maxsize=1)
def versions() -> str:
    """The ``versions`` column of this process's rows."""
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    pairs = {"driver": _nvidia_smi().get("driver", ""), "cuda": torch.version.cuda or "",
             "torch": torch.__version__, "cudnn": str(cudnn) if cudnn else ""}
    pairs.update({key: _distribution_version(dist) for key, dist in PEER_DISTRIBUTIONS.items()})
    return _join(pairs)
