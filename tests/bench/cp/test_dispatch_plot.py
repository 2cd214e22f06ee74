"""bench.cp.dispatch_plot: the solver's chunk owners, loads and group_cast volume, checked
against the dense mask, and figures that keep every text inside the canvas."""
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from bench.barplot import texts_outside_canvas
from bench.cp.dispatch_plot import dispatch_figure, dispatch_stats, volume_figure, write_figures
from bench.data import sample_doc_lens
from bench.masks import build_mask
from bench.masks.convert import to_dense

SEQLEN, CHUNK = 2048, 128


@pytest.mark.parametrize("mask", ["full", "causal_document", "sliding_window_causal"])
@pytest.mark.parametrize("cp_size", [2, 4])
def test_stats_match_the_dense_mask(mask, cp_size):
    stats = dispatch_stats(mask, SEQLEN, cp_size, CHUNK)
    num_chunks = SEQLEN // CHUNK
    assert np.bincount(stats.owner, minlength=cp_size).tolist() == [num_chunks // cp_size] * cp_size
    dense = to_dense(build_mask(mask, SEQLEN, doc_lens=sample_doc_lens(SEQLEN, seed=0), seed=0))
    rows_of_chunk = dense.reshape(num_chunks, CHUNK, SEQLEN)
    assert stats.chunk_area.tolist() == rows_of_chunk.sum(dim=(1, 2)).tolist()
    token_owner = np.repeat(stats.owner, CHUNK)
    for rank in range(cp_size):
        keys_needed = rows_of_chunk[stats.owner == rank].any(dim=(0, 1)).numpy()
        remote = keys_needed & (token_owner != rank)
        assert stats.received_tokens[rank] == remote.sum()  # group_cast moves exactly these
        assert stats.rank_area[rank] == stats.chunk_area[stats.owner == rank].sum()
    assert (stats.received_tokens <= stats.ring_tokens_per_rank).all()
    assert (stats.volume_ratio == 1.0) == (mask == "full")


def test_dispatch_figure_keeps_texts_inside_and_names_every_rank():
    fig = dispatch_figure(dispatch_stats("block_causal_document", SEQLEN, 8, CHUNK))
    assert texts_outside_canvas(fig) == []
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [f"rank {r}" for r in range(8)]
    plt.close(fig)


def test_volume_figure_and_files(tmp_path):
    paths = write_figures(tmp_path, SEQLEN, (2, 4), CHUNK, masks=("full", "causal_document"))
    assert {p.relative_to(tmp_path).as_posix() for p in paths} == {
        "full/dispatch_cp2.png", "full/dispatch_cp4.png", "causal_document/dispatch_cp2.png",
        "causal_document/dispatch_cp4.png", "comm_volume.csv", "comm_volume.png"}
    table = pd.read_csv(tmp_path / "comm_volume.csv")
    assert table.set_index(["mask", "cp_size"]).loc[("full", 4), "volume_ratio"] == 1.0
    fig = volume_figure(table)
    assert texts_outside_canvas(fig) == []
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["full", "causal_document"]
    plt.close(fig)
