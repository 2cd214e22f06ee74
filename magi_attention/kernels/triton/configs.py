"""Tile configurations of the Triton FFA kernels, one frozen dataclass per kernel, each picked by
one function. The plan (kernels.block_sparse) is built per tile shape, so the configs are chosen
on the host rather than by triton.autotune. Measurements behind each choice:
docs/design/ffa_kernels.md."""
from __future__ import annotations

from dataclasses import dataclass

SUPPORTED_HEAD_DIMS = (64, 128, 256)
# above this head_dim the fp32 accumulators need the smaller tiles of FWD_WIDE / BWD_WIDE below
WIDE_HEAD_DIM = 128


@dataclass(frozen=True)
class FwdConfig:
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    partial_stages: int = 1  # pipelining depth of the masked-tile loop (1: none, saves smem)
    use_tma: bool = False  # tensor-descriptor (TMA) loads of Q, K, V and store of O (sm90+)
    # ptxas register cap per thread (Triton's maxnreg); None: ptxas decides (up to 255). 128 at
    # 8 warps lets two programs share an SM's 64K registers (tools/triton_resources.py)
    max_registers: int | None = None
    # rows with more key intervals than this mask partial tiles from the slice list instead of
    # the per-row interval table (block_sparse.MAX_TABLE_INTERVALS; -1 forces the slice list)
    max_table_intervals: int = 8
    # PackGQA: a program holds the GROUP q heads of one kv head over block_m // GROUP positions,
    # so each K/V tile is loaded once per group and the mask is cut at GROUP-times finer rows
    # (the plan is built at block_m // GROUP); Q and O by pointers, K and V as use_tma says
    pack_gqa: bool = False


@dataclass(frozen=True)
class BwdConfig:
    block_m1: int  # q rows per step of the dk/dv kernel
    block_n1: int  # keys owned by one dk/dv program
    block_m2: int  # q rows owned by one dq program
    block_n2: int  # keys per step of the dq kernel
    num_warps: int
    num_stages: int
    partial_stages: int = 1
    use_tma: bool = False  # TMA loads of Q, dO, K, V in the dk/dv programs
    max_table_intervals: int = 8
    max_registers: int | None = None  # as FwdConfig.max_registers, for every backward kernel


def launch_options(config: FwdConfig | BwdConfig) -> dict:
    """The Triton launch options of a config: warps, stages and, when set, the register cap."""
    options = {"num_warps": config.num_warps, "num_stages": config.num_stages}
    if config.max_registers is not None:
        options["maxnreg"] = config.max_registers
    return options


# q tiles that list fewer key tiles than this on average (short rows: documents, windows) run
# the forward at 8 warps capped to 128 registers (two programs per SM, no spills): H200, GQA
# 64:8, d128, 128x64 tiles, TFLOPs/s default -> short-row config (two sweeps):
# causal_document 16k (16 tiles per q tile) 322 -> 342 | 330 -> 354,
# block_causal_document 16k (29) 367 -> 388 | 386 -> 393, sliding_window_causal 16k (17) 339 ->
# 344, 64k (18) 367 -> 372; at 83-97 tiles (64k documents) -1 to +2%, on full and causal
# (129-1024) -1 to -3%: those keep the default.
SHORT_ROW_TILES = 64


def fwd_config(head_dim: int, tiles_per_q_tile: float | None = None) -> FwdConfig:
    """The forward config; ``tiles_per_q_tile`` (the plan's listed key tiles per q tile, known
    once the plan is built at the default tiles) picks the short-row variant below
    SHORT_ROW_TILES."""
    # H200, bf16, GQA 64:8, d128, S=16k; TFLOPs/s full/causal/causal_document (docs/design/
    # ffa_kernels.md): 128x64 w4 s3 p2: 475/453/304 (best on documents, ~2% off on full);
    # p1: 485/458/251; p3: 363/375/227 (smem: 1 CTA/SM); s2 p2: 422/433/294;
    # 128x128 w8 s3 p1: 475/452/282. head_dim 64 uses the same tiles (not swept).
    # a later sweep (16k | 64k, full/causal/causal_document):
    # TMA loads at these tiles 512/499/331 | 517/517/470 against pointer loads 479/487/304 |
    # 471/491/448: best on every cell of the five masks. Triton's warp specialisation of the
    # unmasked loop (128x128 w8 s2) 427/432/281 and iterating a run of full tiles without index
    # loads 438/424/245 lost; so did conditional rescaling (threshold 8: -1 to -13%) and the
    # next tile's QK^T before this one's softmax (128x128 w8: 0.81-0.91x), on every cell.
    if head_dim > WIDE_HEAD_DIM:
        return FWD_WIDE
    if tiles_per_q_tile is not None and tiles_per_q_tile < SHORT_ROW_TILES:
        return FwdConfig(block_m=128, block_n=64, num_warps=8, num_stages=3, partial_stages=2,
                         use_tma=True, max_registers=128)
    return FwdConfig(block_m=128, block_n=64, num_warps=4, num_stages=3, partial_stages=2,
                     use_tma=True)


# PackGQA (FwdConfig.pack_gqa), one H100, GQA 64:8, d128, 16k, TFLOPs/s: Triton forward
# unpacked -> packed at the
# short-row tiles, and the library's route before (Gluon where its plan suits):
#   block_sparse 26 -> 500 (route 23), hash_sparse 36 -> 354 (35), var_block_sparse 205 ->
#   504 (176), qk_sparse 433 -> 466 (382), causal_document 357 -> 391 (Gluon 396),
#   sliding_window_causal 370 -> 392 (Gluon 409), full 514 -> 514 (Gluon 630).
# The short-row tiles won packed on every mask but full (default tiles 527, within 3%), and
# TMA K/V loads tied pointer loads there; so one packed config. Where q tiles of 128 rows cut
# blocks of 64 (the sparse masks) their partial tiles masked from the slice list; packed,
# 16-position tiles are whole blocks.


def pack_config(head_dim: int, group: int) -> FwdConfig | None:
    """The PackGQA forward config for GQA group ``group``, or None where it does not apply: no
    group to pack, a group that does not divide the q tile, or head_dim above 128 (not timed)."""
    if group <= 1 or head_dim > WIDE_HEAD_DIM:
        return None
    config = FwdConfig(block_m=128, block_n=64, num_warps=8, num_stages=3, partial_stages=2,
                       use_tma=True, max_registers=128, pack_gqa=True)
    return config if config.block_m % group == 0 else None


def bwd_config(head_dim: int) -> BwdConfig:
    # H200 sweep (16k full/causal/causal_document): the ordered two-kernel path 362/360/258
    # beat every one-pass (atomic dQ) variant: best 64x128 w8 s2 339/313/198, 64x64 w4
    # 169/154/121, TMA 64x128 w8 298/278/180, and so did the ordered kernels in one launch
    # (FlexAttention's layout). Two-kernel tiles: 64/64/64/64 w4 s3 p2: 365/355/246 (best); p1:
    # 365/347/224; p3: 302/293/218; 64/128/128/64 w8 s3 p1: 332/345/210; the tutorial's
    # 32/128/128/32 w4: 143/130. One run (16k | 64k, full/causal/
    # causal_document/block_causal_document): TMA loads in the dk/dv programs 379/370/255/295 |
    # 360/380/352/358 against pointer loads 359/357/249/289 | 335/360/342/345: ahead on all 8
    # cells (+2 to +8%); s2 (fewer spills) wins only causal_document 16k (259), 32-row q steps
    # (no spills) lose everywhere. Default since.
    if head_dim > WIDE_HEAD_DIM:
        return BWD_WIDE
    return BwdConfig(block_m1=64, block_n1=64, block_m2=64, block_n2=64, num_warps=4,
                     num_stages=3, partial_stages=2, use_tma=True)


# head_dim 129-256 (Gemma's 256), shortlisted by what ptxas reports for sm_90a, compiled on
# the CPU (tools/triton_resources.py): forward, causal, d256: 64x64 w4 s2
# spills 168 bytes; 128x64 w8 s2 255 registers, no spill, 192 KB shared (one program an SM);
# 64x32 w4 s3 no spill, 96 KB (two). Pointer loads: a 256-wide bf16 row is 512 bytes, past one
# 128-byte TMA swizzle span. Backward (ordered path), dk/dv kernel: 32/64/64/32 w4 spills ~3 KB,
# w8 500 bytes; 32/32/32/32 w4 s2 12 bytes, 80 KB (two programs an SM).
# Timed (one H100, GQA 64:8, bf16, 16k, full | causal TFLOPs/s): forward 128x64 w8 s2
# 502 | 516, 64x32 w4 s3
# 363 | 411, 64x64 w4 s2 317 | 364; backward 64/64/64/64 w8 s2 195 | 212 (chosen), 32/32 w4 s2
# 149 | 153 (the no-spill pick), s3 152 | 155, 32/64/64/32 w8 132 | 148.
FWD_WIDE = FwdConfig(block_m=128, block_n=64, num_warps=8, num_stages=2, partial_stages=1)
BWD_WIDE = BwdConfig(block_m1=64, block_n1=64, block_m2=64, block_n2=64, num_warps=8,
                     num_stages=2, partial_stages=1)
