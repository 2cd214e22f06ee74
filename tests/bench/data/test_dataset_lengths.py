"""build_distribution on small jsonl, parquet and save_to_disk datasets written by the tests."""
import json
import subprocess
import sys

import pandas as pd
import pytest

# an optional package (the dataset -> distribution tool); the GPU machine goes without it
datasets = pytest.importorskip("datasets")

from bench.data import build_distribution, default_bins, load_distribution
from bench.data._cli import main

# Lengths in characters: 5 and 10 fall in [0, 10], 11 and 50 in [11, 50], 1024 in [501, 1024],
# 200000 past the default bins' end (196608), so one extra bin [196609, 393216] is added.
CHAR_LENS = [5, 10, 11, 50, 1024, 200_000]
DEFAULT_EDGES = load_distribution().bins


def records(lens=CHAR_LENS):
    # "xxx..." has n characters and is one whitespace token.
    return [{"text": "x" * n, "id": i} for i, n in enumerate(lens)]


def expected_counts(lens, bins):
    return tuple(sum(low <= n <= high for n in lens) for low, high in bins)


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def jsonl(tmp_path):
    return write_jsonl(tmp_path / "docs.jsonl", records())


@pytest.fixture
def parquet(tmp_path):
    path = tmp_path / "docs.parquet"
    pd.DataFrame(records()).to_parquet(path)
    return path


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "saved"
    datasets.Dataset.from_list(records()).save_to_disk(str(path))
    return path


@pytest.mark.parametrize("source", ["jsonl", "parquet", "saved"])
def test_char_counts_per_format(source, request, tmp_path):
    dist = build_distribution(request.getfixturevalue(source), "text", cache_dir=str(tmp_path / "cache"))
    assert dist.bins == DEFAULT_EDGES + ((196609, 393216),)
    assert dist.counts == expected_counts(CHAR_LENS, dist.bins)
    assert dist.counts[:2] == (2, 2) and dist.counts[5] == 1 and dist.counts[-1] == 1 and dist.total == 6


def test_default_bins_not_extended_when_docs_fit(tmp_path):
    path = write_jsonl(tmp_path / "short.jsonl", records([1, 2, 3]))
    dist = build_distribution(path, "text", cache_dir=str(tmp_path / "cache"))
    assert dist.bins == DEFAULT_EDGES and dist.counts[0] == 3
    assert default_bins(400_000)[-1] == (393217, 786432)


def test_dataset_dict_counts_all_splits(tmp_path):
    path = tmp_path / "dd"
    datasets.DatasetDict({
        "train": datasets.Dataset.from_list(records([5, 60])),
        "test": datasets.Dataset.from_list(records([70])),
    }).save_to_disk(str(path))
    dist = build_distribution(path, "text")
    assert dist.counts[0] == 1 and dist.counts[2] == 2 and dist.total == 3


def test_tokens_whitespace_callable_and_encode(tmp_path):
    rows = [{"text": "a b c"}, {"text": " ".join(["w"] * 60)}, {"text": ""}, {"text": None}]
    path = write_jsonl(tmp_path / "tok.jsonl", rows)
    cache = str(tmp_path / "cache")
    by_words = build_distribution(path, "text", by="tokens", cache_dir=cache)
    assert by_words.counts[:3] == (3, 0, 1)  # 3, 0 and 0 (None) words; 60 words

    class CharTokenizer:  # the HF-tokenizer shape: .encode(text) -> ids
        def encode(self, text):
            return list(text.encode())

    by_encode = build_distribution(path, "text", by="tokens", tokenizer=CharTokenizer(), cache_dir=cache)
    assert by_encode.counts[:4] == (3, 0, 0, 1)  # 5, 0 and 0 chars; 119 chars
    by_callable = build_distribution(path, "text", by="tokens", tokenizer=list, cache_dir=cache)
    assert by_callable == by_encode


def test_custom_bins(jsonl, tmp_path):
    bins = [(0, 99), (100, 999_999)]
    dist = build_distribution(jsonl, "text", bins=bins, cache_dir=str(tmp_path / "cache"))
    assert dist.bins == tuple(bins) and dist.counts == (4, 2)
    with pytest.raises(ValueError, match="lengths in no bin, e.g. \\[200000\\]"):
        build_distribution(jsonl, "text", bins=[(0, 99), (100, 1024)], cache_dir=str(tmp_path / "cache"))


@pytest.mark.parametrize("source", ["jsonl", "parquet", "saved"])
def test_unknown_field_lists_available(source, request, tmp_path):
    with pytest.raises(ValueError, match=r"unknown field 'body'; available fields: \['text', 'id'\]"):
        build_distribution(request.getfixturevalue(source), "body", cache_dir=str(tmp_path / "cache"))


def test_non_text_field_raises(jsonl, tmp_path):
    with pytest.raises(ValueError, match="field 'id': record 0: expected a str, got int"):
        build_distribution(jsonl, "id", cache_dir=str(tmp_path / "cache"))


@pytest.mark.parametrize("name, content, problem", [
    ("missing.jsonl", None, "missing.jsonl does not exist"),
    ("docs.txt", "hello", "unsupported suffix '.txt'"),
    ("broken.jsonl", '{"text": broken\n', "broken.jsonl: cannot be read as json"),
    ("broken.parquet", "not parquet", "broken.parquet: cannot be read as parquet"),
])
def test_bad_paths_raise(tmp_path, name, content, problem):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(ValueError, match=problem):
        build_distribution(path, "text", cache_dir=str(tmp_path / "cache"))


def test_folder_not_from_save_to_disk_raises(tmp_path):
    with pytest.raises(ValueError, match="not one written by save_to_disk"):
        build_distribution(tmp_path, "text")


@pytest.mark.parametrize("kwargs, problem", [
    (dict(by="words"), "by must be 'chars' or 'tokens'"),
    (dict(by="chars", tokenizer=list), "only used with by='tokens'"),
    (dict(by="tokens", tokenizer=3), "tokenizer must be callable"),
])
def test_bad_length_options_raise(jsonl, kwargs, problem):
    with pytest.raises(ValueError, match=problem):
        build_distribution(jsonl, "text", **kwargs)


def test_cli_writes_a_loadable_csv(saved, tmp_path, capsys):
    out = tmp_path / "mine.csv"
    assert main(["--path", str(saved), "--field", "text", "--by", "chars", "--out", str(out)]) == 0
    assert load_distribution(str(out)) == build_distribution(saved, "text")
    assert "6 records" in capsys.readouterr().out


def test_cli_reports_unknown_field(saved, tmp_path):
    with pytest.raises(SystemExit, match="unknown field 'body'"):
        main(["--path", str(saved), "--field", "body", "--out", str(tmp_path / "x.csv")])


def test_cli_as_module(saved, tmp_path):
    out = tmp_path / "mine.csv"
    subprocess.run([sys.executable, "-m", "bench.data.build_distribution", "--path", str(saved),
                    "--field", "text", "--by", "tokens", "--out", str(out)], check=True, capture_output=True)
    assert load_distribution(str(out)).counts[0] == 6  # one whitespace token per record
