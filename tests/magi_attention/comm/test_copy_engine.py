"""The copy engines' row copies (comm.copy_engine): the 2-D copy a pair of views asks for, checked
by doing that copy row by row in host memory the way cuMemcpy2D defines it (CPU), and the copy
itself on a GPU against torch's."""
import ctypes

import pytest
import torch

from magi_attention.comm.copy_engine import (copy_engine_reason, copy_rows_, row_block,
                                             rows_contiguous)


def _host_copy(block) -> None:
    """cuMemcpy2D's meaning, on host memory: row r's ``width`` bytes from src + r * src_pitch to
    dst + r * dst_pitch."""
    for r in range(block.height):
        ctypes.memmove(block.dst + r * block.dst_pitch, block.src + r * block.src_pitch,
                       block.width)


def _fused_views(rows=37, heads=3, dim=8, dtype=torch.bfloat16):
    g = torch.Generator().manual_seed(0)
    k = torch.randn(rows, heads, dim, generator=g).to(dtype)
    v = torch.randn(rows, heads, dim, generator=g).to(dtype)
    kv = torch.zeros(rows + 11, 2 * heads, dim, dtype=dtype)
    return k, v, kv


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_row_block_is_the_copy_of_k_and_v_into_the_fused_halves(dtype):
    k, v, kv = _fused_views(dtype=dtype)
    h = k.shape[1]
    expected = kv.clone()
    expected[5:25, :h] = k[3:23]
    expected[5:25, h:] = v[10:30]
    _host_copy(row_block(kv[5:25, :h], k[3:23]))
    _host_copy(row_block(kv[5:25, h:], v[10:30]))
    assert torch.equal(kv, expected)
    block = row_block(kv[5:25, h:], v[10:30])
    elem = kv.element_size()
    assert (block.width, block.height) == (h * 8 * elem, 20)
    assert (block.dst_pitch, block.src_pitch) == (2 * h * 8 * elem, h * 8 * elem)


def test_row_block_one_row_and_one_dimension():
    k, _, kv = _fused_views()
    expected = kv.clone()
    expected[7:8, :3] = k[4:5]
    _host_copy(row_block(kv[7:8, :3], k[4:5]))
    assert torch.equal(kv, expected)
    a, b = torch.arange(10.0), torch.zeros(20)
    _host_copy(row_block(b[::2], a))  # rows of one element, every other slot
    assert torch.equal(b[::2], a) and not b[1::2].any()


def test_zero_rows_is_an_empty_copy_and_row_contiguity():
    k, _, kv = _fused_views()
    block = row_block(kv[3:3, :3], k[0:0])
    assert block.height == 0 and block.width == 3 * 8 * kv.element_size()
    assert rows_contiguous(kv[:, :3]) and rows_contiguous(k[0:0]) and rows_contiguous(k[:, :1])
    assert not rows_contiguous(kv[:, ::2]) and not rows_contiguous(k.transpose(1, 2))


@pytest.mark.parametrize("case", ["shape", "dtype", "rows", "overlap"])
def test_row_block_refuses_what_one_2d_copy_cannot_do(case):
    k, _, kv = _fused_views()
    h = k.shape[1]
    dst, src = kv[:10, :h], k[:10]
    if case == "shape":
        src = k[:9]
    elif case == "dtype":
        src = src.float()
    elif case == "rows":  # a row's heads strided: not one contiguous run of bytes
        dst = kv[:10, ::2]
    else:
        src = k[:1].expand(10, h, k.shape[2])
    with pytest.raises(ValueError):
        row_block(dst, src)


def test_cpu_tensors_have_a_reason_and_a_clear_error():
    k, _, kv = _fused_views()
    assert "CUDA" in copy_engine_reason(k)
    with pytest.raises(ValueError, match="CUDA"):
        copy_rows_(kv[:4, :3], k[:4])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_copy_engine_copies_rows_on_the_current_stream():
    k, v, kv = (t.cuda() for t in _fused_views(rows=4096, heads=8, dim=128))
    h = k.shape[1]
    expected = kv.clone()
    expected[100:3000, :h] = k[50:2950]
    expected[100:3000, h:] = v[1000:3900]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # issued on the side stream, read after it
        copy_rows_(kv[100:3000, :h], k[50:2950])
        copy_rows_(kv[100:3000, h:], v[1000:3900])
        copy_rows_(kv[0:0, :h], k[0:0])  # nothing to move
    torch.cuda.current_stream().wait_stream(side)
    assert torch.equal(kv, expected)
