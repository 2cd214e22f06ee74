"""The predictor's configuration: its Hydra schema and the typed config the entry point builds.

``configs/predict.yaml`` composes the same groups as ``configs/cp_bench.yaml`` (``cp/``,
``mask/``, ``data/``, ``hardware/``, ``experiment/``), so any CP sweep can be predicted with
the overrides that run it, plus the predictor's own settings:

    gpus_per_node: 8            ranks per node (consecutive ranks share one)
    links.*                     effective per-GPU bandwidths (GB/s) and latencies (us)
    memory_gb_per_s: null       HBM bandwidth of elementwise passes (null: the GPU's default)
    results_root: results       where the single-GPU rows of the rate table are read
    details: false              also write every rank's area and bytes per stage and link
                                class (<job>_ranks.csv beside the rows; large at cp 64+)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from bench.config import CPBenchConfig, CPBenchSchema, cp_bench_config

from .links import LinkModel, Topology

__all__ = ["LinksSchema", "PredictSchema", "PredictConfig", "predict_config",
           "register_predict_schema", "gpu_memory_gb_per_s", "MEMORY_GB_PER_S"]

# effective HBM bandwidth of an elementwise pass (nominal: H100 SXM 3.35 TB/s, H200 4.8,
# B200 8), about 85% of it
MEMORY_GB_PER_S = {"h100": 2800.0, "h200": 4000.0, "b200": 6800.0}
MAX_CP_SIZE = 256
NOT_IN_KEY = ("details", "results_root")
# the local kernels the rate table prices; "auto" is FA4, as on Hopper with flash-attn-4
LOCAL_KERNELS = {"auto": "fa4", "fa4": "fa4", "triton": "triton"}


def gpu_memory_gb_per_s(gpu: str) -> float:
    if gpu not in MEMORY_GB_PER_S:
        raise ValueError(f"no default HBM bandwidth for hardware {gpu!r}; set memory_gb_per_s "
                         f"(known: {', '.join(MEMORY_GB_PER_S)})")
    return MEMORY_GB_PER_S[gpu]


@dataclass
class LinksSchema:
    nvlink_gb_per_s: float = LinkModel.nvlink_gb_per_s
    network_gb_per_s: float = LinkModel.network_gb_per_s
    nvlink_latency_us: float = LinkModel.nvlink_latency_us
    network_latency_us: float = LinkModel.network_latency_us


@dataclass
class PredictSchema(CPBenchSchema):
    gpus_per_node: int = 8
    links: LinksSchema = field(default_factory=LinksSchema)
    memory_gb_per_s: Optional[float] = None
    results_root: str = "results"
    details: bool = False


def register_predict_schema() -> None:
    ConfigStore.instance().store(name="predict_schema", node=PredictSchema)


@dataclass(frozen=True, kw_only=True)
class PredictConfig:
    """The CP sweep to predict (``sweep``: its strategies, masks, sizes and shapes; rows go to
    ``<out_dir>/cp_predicted/<job>.csv``) and the models' settings."""

    sweep: CPBenchConfig
    topology: Topology
    links: LinkModel
    memory_gb_per_s: float
    results_root: Path
    details: bool = False

    def __post_init__(self) -> None:
        bad = [p for p in self.sweep.cp_sizes if p > MAX_CP_SIZE]
        if bad:
            raise ValueError(f"cp_sizes must be at most {MAX_CP_SIZE}, got {bad}")
        if not self.memory_gb_per_s > 0:
            raise ValueError(f"memory_gb_per_s must be > 0, got {self.memory_gb_per_s}")

    @property
    def out_file(self) -> Path:
        return self.sweep.out_file


def predict_config(cfg: DictConfig, overrides: list[str] | None = None) -> PredictConfig:
    """The typed config of a composed ``configs/predict.yaml``.

    Raises:
        ValueError: a bad value (as ``cp_bench_config``, a cp_size above 256, bandwidths not
            positive, a GPU without a default HBM bandwidth), one line naming it.
    """
    # settings that change no predicted row stay out of the job's file name
    overrides = [o for o in overrides or [] if not o.lstrip("+~").startswith(NOT_IN_KEY)]
    sweep = cp_bench_config(cfg, overrides)
    hw = sweep.hardware
    if hw.device != "cuda":
        raise ValueError(f"hardware={hw.name}: predictions need a GPU preset (h100, h200), whose "
                         f"measured single-GPU rows price the local kernel")
    local = LOCAL_KERNELS.get(sweep.local_kernel)
    if local is None:
        raise ValueError(f"local_kernel must be one of {sorted(LOCAL_KERNELS)} for predictions, "
                         f"got {sweep.local_kernel!r}")
    out_dir = Path(cfg.out_dir) if cfg.out_dir else Path(cfg.results_root) / hw.name
    plots_dir = Path(cfg.plots_dir) if cfg.plots_dir else Path("plots") / hw.name / "cp_predicted"
    sweep = CPBenchConfig(**{**{f: getattr(sweep, f) for f in sweep.__dataclass_fields__},
                             "out_file": out_dir / "cp_predicted" / sweep.out_file.name,
                             "plots_dir": plots_dir, "local_kernel": local})
    memory = cfg.memory_gb_per_s or gpu_memory_gb_per_s(hw.name)
    links = LinkModel(**OmegaConf.to_container(cfg.links, resolve=True))
    return PredictConfig(sweep=sweep, topology=Topology(cfg.gpus_per_node), links=links,
                         memory_gb_per_s=memory, results_root=Path(cfg.results_root),
                         details=cfg.details)
