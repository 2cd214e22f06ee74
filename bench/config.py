"""Configuration: the Hydra schemas (ConfigStore) and the typed frozen dataclasses the runners take.

Hydra composes ``configs/kernels.yaml`` against the schemas below, so a misspelt key fails at
compose time. ``kernel_bench_config(cfg)`` then turns the composed ``cfg`` into a
``KernelBenchConfig`` (validated in ``__post_init__``, so a bad value is one error before the
first cell), resolving ``hardware=auto`` to a preset. Nothing below ``bench/kernels`` sees ``cfg``.

Where rows go: ``out_dir`` (default ``runs/<hardware>``, ignored by git, so a user's run never
mixes with the committed reference rows under ``results/``); a job's rows in
``<out_dir>/kernels/<job>.csv``, its tables in ``<out_dir>/tables/<job>/``, its figures in
``plots_dir`` (default ``<out_dir>/plots/<job>``).

Groups (``configs/<group>/<name>.yaml``; file name == registry name):
    kernel/     one adapter each; several may be selected: ``kernel=[ffa,flex]``. Unset, the
                hardware preset's ``kernels`` list runs. Each file is stored under
                ``kernel.<name>`` (name == file name), so options are ``kernel.flex.options.*``.
                The results' ``kernel`` column is the name, a custom kernel's ``custom:<target>``,
                or ``kernel.<name>.label`` where set.
    mask/       one pattern each (``mask.<label>.params``); several may be selected.
    data/       document-length sampling (distribution, cap_ratio, seed).
    hardware/   presets (device, seqlens, heads, head_dim, dtype, kernels, warmup, repeat);
                ``auto`` picks cpu without CUDA, else h100/h200/b200 by GPU name.
    experiment/ ``# @package _global_`` recipes for the published figures.
"""
from __future__ import annotations

import hashlib
import importlib
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Dict, List, Mapping, Optional

import torch
from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from bench.problem import DTYPES, Shapes
from bench.metrics import DIRECTIONS

__all__ = ["CONFIGS_DIR", "RUNS_DIR", "DEFAULT_SEQLEN_PER_GPU", "KernelChoice", "MaskChoice",
           "StrategyChoice", "DataConfig", "HardwareConfig", "GateConfig", "SweepConfig",
           "KernelBenchConfig", "CPBenchConfig", "kernel_bench_config", "cp_bench_config",
           "resolve_hardware", "register_schemas", "job_key", "default_dirs", "check_cpu_sized",
           "check_seqlens", "check_target", "kernel_label", "check_group_choices"]

CONFIGS_DIR = Path(__file__).resolve().parent.parent / "configs"
HARDWARE_PRESETS = ("cpu", "h100", "h200", "b200")
# A user's runs write here by default (git-ignored); results/ holds the committed reference rows.
RUNS_DIR = Path("runs")
# hardware=auto on a machine without CUDA refuses larger sequences: a GPU recipe (e.g.
# experiment=kernel_masks, up to 64k) would run for hours on CPU; hardware=cpu runs it anyway.
CPU_AUTO_MAX_SEQLEN = 4096
# seqlen_per_gpu of a CP sweep when the config leaves it unset, by hardware device
DEFAULT_SEQLEN_PER_GPU = {"cpu": (256,), "cuda": (8192,)}
# sink=true: attention-sink logits per q head (one, as gpt-oss and FA4's learnable_sink have)
SINK_LOGITS = 1


# ----------------------------------------------------------------------------- Hydra schemas
@dataclass
class KernelSchema:
    name: str = MISSING                     # registry name (bench.kernels.KERNELS)
    target: Optional[str] = None            # custom only: "pkg.module:function"
    label: Optional[str] = None             # results column; None: name, custom:<target>
    options: Dict[str, Any] = field(default_factory=dict)


@dataclass
class MaskSchema:
    name: str = MISSING                     # pattern name (bench.masks.MASK_NAMES)
    params: Dict[str, Any] = field(default_factory=dict)
    seqlens: Optional[List[int]] = None     # this mask's seqlens, instead of the run's


@dataclass
class DataSchema:
    distribution: str = "default"
    cap_ratio: float = 0.25
    seed: int = 0


@dataclass
class HardwareSchema:
    """``auto`` leaves the fields None; the chosen preset fills them, explicit values win."""

    name: str = MISSING
    device: Optional[str] = None
    seqlens: Optional[List[int]] = None
    batch: Optional[int] = None
    num_heads_q: Optional[int] = None
    num_heads_kv: Optional[int] = None
    head_dim: Optional[int] = None
    dtype: Optional[str] = None
    kernels: Optional[List[str]] = None
    warmup: Optional[int] = None
    repeat: Optional[int] = None
    warmup_ms: Optional[float] = None    # None: 0 (warm by count alone)
    rounds: Optional[int] = None         # None: 1 (CP: each strategy timed once, in turn)


@dataclass
class GateSchema:
    enabled: bool = True
    rows: int = 256                      # query rows compared at large S
    full_max_seqlen: int = 2048          # at or below: every row; gradients at every seqlen
    seed: int = 0


@dataclass
class SweepSchema:
    """What both sweeps' configs hold (configs/kernels.yaml, configs/cp_bench.yaml)."""

    mask: Dict[str, MaskSchema] = field(default_factory=dict)
    data: DataSchema = field(default_factory=DataSchema)
    hardware: HardwareSchema = field(default_factory=HardwareSchema)
    gate: GateSchema = field(default_factory=GateSchema)
    directions: List[str] = field(default_factory=lambda: ["fwd", "bwd"])
    experiment_name: str = "default"
    out_dir: Optional[str] = None        # None: runs/<hardware>
    plots_dir: Optional[str] = None      # None: <out_dir>/plots/<job>
    force: bool = False                  # re-measure cells that already have a final row
    report: bool = True                  # write tables and plots after the sweep
    progress: bool = True
    seed: int = 0                        # q, k, v values


@dataclass
class KernelBenchSchema(SweepSchema):
    kernel: Dict[str, KernelSchema] = field(default_factory=dict)
    seqlens: Optional[List[int]] = None  # None: the hardware preset's
    sink: bool = False                   # attention sinks (KernelBenchConfig.num_sink)
    compile: bool = False                # time the FFA adapters' torch.compile'd call


@dataclass
class CPSchema:
    name: str = MISSING                   # registry name (bench.cp.STRATEGIES)
    target: Optional[str] = None          # "pkg.module:Class": a CPStrategy outside the registry
    knobs: Dict[str, Any] = field(default_factory=dict)   # null values: the strategy's default


@dataclass
class CPBenchSchema(SweepSchema):
    cp: Dict[str, CPSchema] = field(default_factory=dict)
    cp_sizes: List[int] = field(default_factory=lambda: [1, 2, 4, 8])
    seqlen_per_gpu: Optional[List[int]] = None   # None: 256 on cpu, 8192 on cuda
    local_kernel: str = "auto"            # every strategy's local FFA backend
    experiment_name: str = "cp_default"
    timeout_min: float = 10.0             # process-group timeout (a hung collective ends there)
    time_limit_s: Optional[float] = None  # wall seconds: no point or round started to end past it


def register_schemas() -> None:
    """Store the schemas; configs/ files name them in their defaults lists."""
    cs = ConfigStore.instance()
    cs.store(name="kernels_schema", node=KernelBenchSchema)
    cs.store(name="cp_bench_schema", node=CPBenchSchema)
    cs.store(group="kernel", name="base_kernel", node=KernelSchema)
    cs.store(group="cp", name="base_cp", node=CPSchema)
    cs.store(group="mask", name="base_mask", node=MaskSchema)
    cs.store(group="data", name="base_data", node=DataSchema)
    cs.store(group="hardware", name="base_hardware", node=HardwareSchema)


# ----------------------------------------------------------------------------- typed config
def _freeze(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class KernelChoice:
    """One kernel of a sweep. ``label`` is the results' ``kernel`` column; a custom kernel's
    bare label ``custom`` becomes ``custom:<target>``, as rows so labelled read back
    (``bench.results.read_results``), so two targets never share a column."""

    label: str
    name: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from bench.kernels import _TESTING_KERNELS, KERNELS
        if self.name not in KERNELS and self.name not in _TESTING_KERNELS:
            raise ValueError(f"kernel {self.label!r}: unknown adapter name {self.name!r}; "
                             f"known: {', '.join(KERNELS)}")
        target = self.options.get("target")
        if target is not None or self.name == "custom":
            check_target(f"kernel.{self.label}.target", target)
        if self.name == "custom" and self.label == "custom":
            from bench.results import custom_label
            object.__setattr__(self, "label", custom_label(target))  # frozen: set once, here


def check_target(name: str, target: Any) -> None:
    """An import path ``pkg.module:attr``, else ValueError naming ``name``."""
    module, sep, attr = str(target or "").partition(":")
    if not isinstance(target, str) or not sep or not module or not attr or ":" in attr:
        raise ValueError(f"{name} must be 'pkg.module:function', got {target!r}")


def check_seqlens(name: str, seqlens: Any) -> None:
    """A non-empty sequence of positive ints, else ValueError naming ``name``."""
    if not seqlens or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in seqlens):
        raise ValueError(f"{name} must be positive ints, got {list(seqlens or [])}")


def check_cpu_sized(hardware: "HardwareConfig", auto: bool, largest_seqlen: int, what: str) -> None:
    """Refuse a GPU-sized run that ``hardware=auto`` put on the CPU preset (no CUDA here)."""
    if auto and hardware.device == "cpu" and largest_seqlen > CPU_AUTO_MAX_SEQLEN:
        raise ValueError(f"no CUDA here, so hardware=auto picked the cpu preset, but {what} reaches "
                         f"seqlen {largest_seqlen}, sized for a GPU (hours on CPU); add hardware=cpu "
                         f"to run it on this CPU anyway, or choose sizes whose seqlen stays within "
                         f"{CPU_AUTO_MAX_SEQLEN}")


@dataclass(frozen=True)
class MaskChoice:
    label: str                                   # the results' ``mask`` column
    name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    seqlens: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        from bench.masks import check_params
        try:  # names now, so a misspelt parameter stops the run before its first cell
            check_params(self.name, self.params)
        except ValueError as e:
            raise ValueError(f"mask {self.label!r}: {e}") from None
        if self.seqlens is not None:
            check_seqlens(f"mask.{self.label}.seqlens", self.seqlens)


@dataclass(frozen=True)
class DataConfig:
    distribution: str = "default"
    cap_ratio: float = 0.25
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.cap_ratio <= 1:
            raise ValueError(f"data.cap_ratio must be in (0, 1], got {self.cap_ratio}")


@dataclass(frozen=True)
class HardwareConfig:
    name: str
    device: str
    seqlens: tuple[int, ...]
    batch: int
    num_heads_q: int
    num_heads_kv: int
    head_dim: int
    dtype: str
    kernels: tuple[str, ...]
    warmup: int
    repeat: int
    # after the ``warmup`` calls, more untimed calls back to back until this much GPU time has
    # passed, so every cell is timed at the clocks of sustained load and not at the boost a GPU
    # keeps for a while after the idle of the previous cell's build (bench.metrics.time_cuda_ms)
    warmup_ms: float = 0.0
    # CP runner: > 1 builds and gates every strategy of a (mask, seqlen, cp_size) first, then
    # times them in turn, round after round, each row the median of its rounds; 1 times each
    # strategy once, right after its build (strategies timed seconds apart: at 16k tokens a GPU
    # identical work landed up to 8% apart, docs/design/timing_method.md). The kernel runner
    # ignores it
    rounds: int = 1

    def __post_init__(self) -> None:
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"hardware.device must be 'cpu' or 'cuda', got {self.device!r}")
        check_seqlens("hardware.seqlens", self.seqlens)
        if self.dtype not in DTYPES:
            raise ValueError(f"hardware.dtype must be one of {list(DTYPES)}, got {self.dtype!r}")
        if self.warmup < 0 or self.repeat < 1:
            raise ValueError(f"hardware.warmup must be >= 0 and repeat >= 1, got "
                             f"{self.warmup}, {self.repeat}")
        if self.warmup_ms < 0:
            raise ValueError(f"hardware.warmup_ms must be >= 0, got {self.warmup_ms}")
        if self.rounds < 1:
            raise ValueError(f"hardware.rounds must be >= 1, got {self.rounds}")
        Shapes(self.batch, 1, self.num_heads_q, self.num_heads_kv, self.head_dim, self.dtype)


@dataclass(frozen=True)
class GateConfig:
    enabled: bool = True
    rows: int = 256
    full_max_seqlen: int = 2048
    seed: int = 0

    def __post_init__(self) -> None:
        if self.rows < 1 or self.full_max_seqlen < 0:
            raise ValueError(f"gate.rows must be >= 1 and gate.full_max_seqlen >= 0, got "
                             f"{self.rows}, {self.full_max_seqlen}")


@dataclass(frozen=True)
class StrategyChoice:
    """One strategy of a CP sweep: ``label`` is the rows' ``kernel`` column (the config file
    name, e.g. "usp" or an experiment's "usp_u2"); ``name`` a ``bench.cp.STRATEGIES`` key, or
    ``target`` "pkg.module:Class" for a CPStrategy subclass outside the registry."""

    label: str
    name: str
    knobs: Mapping[str, Any] = field(default_factory=dict)
    target: str | None = None

    def __post_init__(self) -> None:
        from bench.cp import STRATEGIES
        if self.target is None and self.name not in STRATEGIES:
            raise ValueError(f"cp {self.label!r}: unknown strategy name {self.name!r}; known: "
                             f"{', '.join(STRATEGIES)} (or set target: 'pkg.module:Class')")
        if self.target is not None and ":" not in self.target:
            raise ValueError(f"cp {self.label!r}: target must be 'pkg.module:Class', "
                             f"got {self.target!r}")

    def load(self) -> type:
        """The CPStrategy class (ImportError: its module, or a peer library, is missing)."""
        from bench.cp import load_strategy
        if self.target is None:
            return load_strategy(self.name)
        module, cls = self.target.split(":")
        return getattr(importlib.import_module(module), cls)


def _check_labels(group: str, items) -> None:
    labels = [c.label for c in items]
    if len(set(labels)) != len(labels):
        raise ValueError(f"{group} labels must be unique, got {labels}")


@dataclass(frozen=True, kw_only=True)
class SweepConfig:
    """What both sweeps take (``KernelBenchConfig``, ``CPBenchConfig``), checked once here.

    ``hardware`` gives device, heads, head_dim, dtype, warmup and repeat.
    """

    hardware: HardwareConfig
    masks: tuple[MaskChoice, ...]
    directions: tuple[str, ...] = ("fwd", "bwd")
    data: DataConfig = field(default_factory=DataConfig)
    gate: GateConfig = field(default_factory=GateConfig)
    out_file: Path = Path("results/cpu/default.csv")
    plots_dir: Path | None = None
    force: bool = False
    report: bool = False
    progress: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("masks", "directions"):
            if not getattr(self, name):
                raise ValueError(f"{name} must not be empty")
        bad = [d for d in self.directions if d not in ("fwd", "bwd")]
        if bad:
            raise ValueError(f"directions must be 'fwd' and/or 'bwd', got {bad} "
                             f"(known metric directions: {DIRECTIONS})")
        _check_labels("mask", self.masks)

    @property
    def results_dir(self) -> Path:
        """The folder whose CSV files hold this hardware's rows (skip checks read all of them)."""
        return self.out_file.parent

    @property
    def tables_dir(self) -> Path:
        """Where the report of this job's rows goes: ``<out_dir>/tables/<job>``."""
        return self.results_dir.parent / "tables" / self.out_file.stem


@dataclass(frozen=True, kw_only=True)
class KernelBenchConfig(SweepConfig):
    """Everything one kernel sweep needs; built by :func:`kernel_bench_config` or by hand.

    ``num_sink``: attention-sink logits per q head in every cell (``sink=true``: SINK_LOGITS);
    the gate's reference has them, so every kernel must be asked for them (option sink=True:
    the ones without sinks then give unsupported rows)."""

    kernels: tuple[KernelChoice, ...]
    seqlens: tuple[int, ...]
    out_file: Path = Path("results/cpu/kernels/default.csv")
    num_sink: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.kernels:
            raise ValueError("kernels must not be empty")
        check_seqlens("seqlens", self.seqlens)
        _check_labels("kernel", self.kernels)
        odd = [k.label for k in self.kernels
               if bool(k.options.get("sink")) != bool(self.num_sink)]
        if odd:
            raise ValueError(f"num_sink={self.num_sink} but kernels {odd} have option "
                             f"sink={not self.num_sink}: a sink is the whole sweep's or none's")

    def shapes(self, seqlen: int) -> Shapes:
        hw = self.hardware
        return Shapes(hw.batch, seqlen, hw.num_heads_q, hw.num_heads_kv, hw.head_dim, hw.dtype,
                      self.num_sink)

    def seqlens_for(self, mask: MaskChoice) -> tuple[int, ...]:
        return mask.seqlens or self.seqlens


@dataclass(frozen=True, kw_only=True)
class CPBenchConfig(SweepConfig):
    """Everything one CP sweep needs; built by :func:`cp_bench_config` or by hand. The
    hardware preset's ``seqlens``, ``batch`` and ``kernels`` belong to the kernel sweep."""

    strategies: tuple[StrategyChoice, ...]
    seqlen_per_gpu: tuple[int, ...]
    cp_sizes: tuple[int, ...] = (1, 2, 4, 8)
    local_kernel: str = "auto"
    out_file: Path = Path("results/cpu/cp/default.csv")
    time_limit_s: float | None = None   # bench.cp.runner: points and rounds stop short of it

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("strategies", "seqlen_per_gpu", "cp_sizes"):
            if not getattr(self, name):
                raise ValueError(f"{name} must not be empty")
        if self.time_limit_s is not None and not self.time_limit_s > 0:
            raise ValueError(f"time_limit_s must be > 0 seconds (or null), got {self.time_limit_s}")
        if any(p < 1 for p in self.cp_sizes) or len(set(self.cp_sizes)) != len(self.cp_sizes):
            raise ValueError(f"cp_sizes must be distinct positive ints, got {list(self.cp_sizes)}")
        check_seqlens("seqlen_per_gpu", self.seqlen_per_gpu)
        _check_labels("cp", self.strategies)
        for m in self.masks:
            if m.seqlens:
                raise ValueError(f"mask {m.label!r} sets seqlens={list(m.seqlens)}, a kernel "
                                 f"benchmark setting; the CP sweep uses seqlen_per_gpu")

    def shapes(self, seqlen: int) -> Shapes:
        hw = self.hardware
        return Shapes(1, seqlen, hw.num_heads_q, hw.num_heads_kv, hw.head_dim, hw.dtype)


GPU_PRESETS = ("b200", "h200", "h100")  # presets named after a GPU, matched in its name


def _named_preset(gpu: str) -> str | None:
    """The GPU preset named in a GPU's name, or None."""
    return next((p for p in GPU_PRESETS if p in gpu.lower()), None)


def auto_preset() -> str:
    """cpu without CUDA; else the preset named in the GPU's name (h100 when none matches)."""
    if not torch.cuda.is_available():
        return "cpu"
    return _named_preset(torch.cuda.get_device_name()) or "h100"


def preset_mismatch(name: str) -> str | None:
    """Why a GPU preset does not fit this machine's GPU (hardware=h100 on an H200: the rows,
    files and plots are then named h100 while ``gpu_name`` says H200), or None where it fits
    or the GPU is none of the presets'."""
    if name not in GPU_PRESETS or not torch.cuda.is_available():
        return None
    gpu = torch.cuda.get_device_name()
    named = _named_preset(gpu)
    if named is None or named == name:
        return None
    return (f"hardware={name} on an {gpu}: its rows, result files and plots are named {name} "
            f"(each row's gpu_name says {gpu}); hardware={named} or hardware=auto names them "
            f"after this GPU")


def resolve_hardware(hardware: Mapping[str, Any], configs_dir: Path = CONFIGS_DIR) -> HardwareConfig:
    """``hardware`` as composed; ``name: auto`` loads the matching preset file and overlays the
    values set explicitly (non-None)."""
    values = {k: v for k, v in dict(hardware).items()}
    if values.get("name") == "auto":
        preset = auto_preset()
        loaded = OmegaConf.to_container(OmegaConf.load(configs_dir / "hardware" / f"{preset}.yaml"))
        loaded.pop("defaults", None)
        values = {**loaded, **{k: v for k, v in values.items() if v is not None and k != "name"}}
        values["name"] = preset
    if values.get("warmup_ms") is None:  # optional: presets need not name it
        values["warmup_ms"] = 0.0
    if values.get("rounds") is None:
        values["rounds"] = 1
    missing = [k for k, v in values.items() if v is None]
    if missing:
        raise ValueError(f"hardware preset {values.get('name')!r} leaves {missing} unset")
    values["seqlens"] = tuple(values["seqlens"])
    values["kernels"] = tuple(values["kernels"])
    mismatch = preset_mismatch(values["name"])
    if mismatch:
        warnings.warn(mismatch, stacklevel=2)
    return HardwareConfig(**values)


_SAFE = re.compile(r"[^A-Za-z0-9_.=,+-]")
_NOT_IN_KEY = ("force", "report", "progress", "out_dir", "plots_dir", "experiment")
# the hardware preset already names the folder (runs/<hardware>/, results/<hardware>/)
_FOLDER_KEYS = ("hardware",)


def job_key(experiment_name: str, overrides: list[str]) -> str:
    """A results file stem for one job: the experiment name plus its task overrides, so
    parallel multirun jobs write distinct files and a rerun appends to its own. The preset
    (``hardware=h200``) names the folder, not the file: ``experiment=kernel_masks
    hardware=h200 out_dir=results/h200`` writes ``results/h200/kernels/kernel_masks.csv``."""
    kept = [o for o in overrides
            if not o.lstrip("+~").split("=")[0].startswith(_NOT_IN_KEY)
            and o.lstrip("+~").split("=")[0] not in _FOLDER_KEYS]
    key = "__".join([experiment_name] + [_SAFE.sub("_", o) for o in sorted(kept)])
    if len(key) > 120:
        key = f"{experiment_name}__{hashlib.sha1(key.encode()).hexdigest()[:12]}"
    return key


def default_dirs(cfg: DictConfig, hardware: HardwareConfig, key: str) -> tuple[Path, Path]:
    """``(out_dir, plots_dir)``: the configured ones, else ``runs/<hardware>`` and
    ``<out_dir>/plots/<job key>``."""
    out_dir = Path(cfg.out_dir) if cfg.out_dir else RUNS_DIR / hardware.name
    plots_dir = Path(cfg.plots_dir) if cfg.plots_dir else out_dir / "plots" / key
    return out_dir, plots_dir


def _common(cfg: DictConfig, out_dir: Path, plots_dir: Path, kind: str,
            key: str) -> dict[str, Any]:
    """The SweepConfig fields of a composed config, either sweep."""
    masks = tuple(MaskChoice(label, m["name"], _freeze(m["params"]),
                             tuple(m["seqlens"]) if m.get("seqlens") else None)
                  for label, m in OmegaConf.to_container(cfg.mask, resolve=True).items())
    return dict(masks=masks, directions=tuple(cfg.directions), data=DataConfig(**cfg.data),
                gate=GateConfig(**cfg.gate), out_file=out_dir / kind / f"{key}.csv",
                plots_dir=plots_dir, force=cfg.force, report=cfg.report, progress=cfg.progress,
                seed=cfg.seed)


def _check_cpu_sized(cfg: DictConfig, hardware: HardwareConfig, largest: int,
                     default_name: str) -> None:
    what = (f"experiment={cfg.experiment_name}" if cfg.experiment_name != default_name
            else "this run")
    check_cpu_sized(hardware, cfg.hardware.name == "auto", largest, what)


def kernel_bench_config(cfg: DictConfig, overrides: list[str] | None = None) -> KernelBenchConfig:
    """The typed config of a composed ``configs/kernels.yaml``.

    Raises:
        ValueError: a bad value (seqlens, heads, a custom target without a colon, a mask
            parameter the pattern does not take, ...), or a GPU-sized run that hardware=auto put
            on the CPU preset; one line, before any cell.
    """
    hardware = resolve_hardware(OmegaConf.to_container(cfg.hardware, resolve=True))
    kernel_cfg = OmegaConf.to_container(cfg.kernel, resolve=True)
    sink, compile_ = bool(cfg.get("sink", False)), bool(cfg.get("compile", False))
    if not kernel_cfg:  # the preset's list, each with the options of its config file
        kernel_cfg = {n: _kernel_file(n) for n in hardware.kernels}
    kernels = tuple(KernelChoice(kernel_label(key, k), k["name"], _freeze(
                        _with_run_options(k["name"], _kernel_options(k), sink, compile_)))
                    for key, k in kernel_cfg.items())
    seqlens = tuple(cfg.seqlens) if cfg.seqlens is not None else hardware.seqlens
    key = job_key(cfg.experiment_name, list(overrides or []))
    out_dir, plots_dir = default_dirs(cfg, hardware, key)
    config = KernelBenchConfig(hardware=hardware, kernels=kernels, seqlens=seqlens,
                               num_sink=SINK_LOGITS if sink else 0,
                               **_common(cfg, out_dir, plots_dir, "kernels", key))
    largest = max(s for m in config.masks for s in config.seqlens_for(m))
    _check_cpu_sized(cfg, hardware, largest, "default")
    return config


def cp_bench_config(cfg: DictConfig, overrides: list[str] | None = None) -> CPBenchConfig:
    """The typed config of a composed ``configs/cp_bench.yaml``.

    Raises:
        ValueError: a bad value (as for :func:`kernel_bench_config`), or a GPU-sized run that
            hardware=auto put on the CPU preset.
    """
    hardware = resolve_hardware(OmegaConf.to_container(cfg.hardware, resolve=True))
    strategies = tuple(
        StrategyChoice(label, s["name"], _freeze(s.get("knobs") or {}), s.get("target"))
        for label, s in OmegaConf.to_container(cfg.cp, resolve=True).items())
    seqlen_per_gpu = (tuple(cfg.seqlen_per_gpu) if cfg.seqlen_per_gpu is not None
                      else DEFAULT_SEQLEN_PER_GPU[hardware.device])
    key = job_key(cfg.experiment_name, [o for o in overrides or []
                                        if not o.startswith(("timeout_min", "time_limit_s"))])
    out_dir, plots_dir = default_dirs(cfg, hardware, key)
    _check_cpu_sized(cfg, hardware, max(seqlen_per_gpu) * max(cfg.cp_sizes, default=1),
                     "cp_default")
    return CPBenchConfig(hardware=hardware, strategies=strategies, seqlen_per_gpu=seqlen_per_gpu,
                         cp_sizes=tuple(cfg.cp_sizes), local_kernel=cfg.local_kernel,
                         time_limit_s=cfg.time_limit_s,
                         **_common(cfg, out_dir, plots_dir, "cp", key))


def _with_run_options(name: str, options: dict[str, Any], sink: bool, compile_: bool
                      ) -> dict[str, Any]:
    """A kernel's options plus the sweep's ``sink`` / ``compile``, which thereby enter its
    ``spec`` (bench.spec: the resume key), so rows with and without are different cells. Every
    kernel gets ``sink`` (one without sinks gives unsupported rows: bench.kernels.load_adapter);
    ``compile`` only those whose class takes it (the FFA adapters): the others run as they
    always do and keep their spec, and so their rows (flex keeps its own ``compile`` option)."""
    from bench.kernels import adapter_class
    if sink:
        options["sink"] = True
    if compile_ and "compile" in adapter_class(name).RUN_OPTIONS:
        options["compile"] = True
    return options


def _kernel_options(k: Mapping[str, Any]) -> dict[str, Any]:
    options = dict(k.get("options") or {})
    if k.get("target") is not None:
        options["target"] = k["target"]
    return options


def kernel_label(key: str, kernel: Mapping[str, Any]) -> str:
    """The results' ``kernel`` column of the kernel config ``kernel`` stored under
    ``kernel.<key>``: its ``label``, else ``custom:<target>`` for a custom kernel (so two
    targets never share a column), else ``key``.

    Raises:
        ValueError: a custom kernel's target that is not 'pkg.module:function'.
    """
    if kernel.get("name") == "custom":
        check_target(f"kernel.{key}.target", kernel.get("target"))
    if kernel.get("label"):
        return str(kernel["label"])
    if kernel.get("name") == "custom":
        from bench.results import custom_label
        return custom_label(kernel["target"])
    return key


# Config groups whose choices a command line names; checked before Hydra composes, which for
# a list (kernel=[a,b]) names the unknown file without listing the known ones.
CLI_GROUPS = ("kernel", "mask", "hardware", "experiment", "data")


def _choices(override) -> list[str]:
    """The choice names an override gives its group (a value, a list, a -m choice sweep of
    them); none for a glob or range sweep, which Hydra expands from the files themselves."""
    from hydra.core.override_parser.types import ValueType

    if override.value_type == ValueType.ELEMENT:
        values = [override.value()]
    elif override.value_type in (ValueType.CHOICE_SWEEP, ValueType.SIMPLE_CHOICE_SWEEP):
        values = list(override.sweep_iterator())
    else:
        return []
    names: list[str] = []
    for value in values:
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                names.append(item)
    return names


def _search_folders(overrides: list, configs_dir: Path) -> list[Path] | None:
    """The config folders Hydra searches: ``configs_dir`` and each ``file://`` entry of
    ``hydra.searchpath``; None when another kind of entry (``pkg://``) makes the set unknown."""
    folders = [configs_dir]
    for override in overrides:
        if override.key_or_group == "hydra.searchpath":
            for entry in override.value() or []:
                if not str(entry).startswith("file://"):
                    return None
                folders.append(Path(str(entry)[len("file://"):]))
    return folders


def check_group_choices(args: list[str], configs_dir: Path = CONFIGS_DIR) -> None:
    """Check the config-group choices of a command line (``kernel=[naive,sdpa_mth]``,
    ``-m mask=causal,ful``) against the config files, before Hydra composes.

    Raises:
        ValueError: one line naming the unknown choice and listing the known ones.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    if any(a.startswith(("--config-dir", "-cd")) for a in args):
        return  # another config folder: Hydra's own error names what it lacks
    try:
        overrides = OverridesParser.create().parse_overrides(
            [a for a in args if "=" in a and not a.startswith("-")])
    except HydraException:
        return  # a malformed override: Hydra's own error says what is wrong
    folders = _search_folders(overrides, configs_dir)
    if folders is None:
        return
    for override in overrides:
        group = override.key_or_group
        if group not in CLI_GROUPS or override.is_delete() or override.is_add():
            continue
        known = sorted({p.stem for f in folders for p in (f / group).glob("*.yaml")})
        unknown = [n for n in _choices(override) if n not in known]
        if unknown:
            own = (" (your own kernel: kernel=custom kernel.custom.target=pkg.module:function)"
                   if group == "kernel" else "")
            raise ValueError(f"unknown {group} {unknown[0]!r} in {override.input_line}; known "
                             f"{group}s: {', '.join(known)}{own}")


def _kernel_file(name: str) -> dict[str, Any]:
    """configs/kernel/<name>.yaml as a dict (a kernel named only by the hardware preset takes
    its options and target); ``{"name": name}`` when there is no such file."""
    path = CONFIGS_DIR / "kernel" / f"{name}.yaml"
    if not path.exists():
        return {"name": name}
    loaded = OmegaConf.to_container(OmegaConf.load(path))
    loaded.pop("defaults", None)
    return {"name": name, **loaded}
