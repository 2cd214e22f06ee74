"""docs/results.md: the reference numbers as they stand, generated entirely from the published
results files (``results/<hardware>/{kernels,cp}/<experiment>.csv``), plus the README's
headline table.

    python -m bench.report docs            # rewrite docs/results.md and the README span
    python -m bench.report docs --check    # exit 1 when either is not what the files give

Per experiment: the run (commit, date, machine) and its state (current, stale with the changed
files, or not one run), the figure links, and per mask and direction a table of TFLOPs/s by
seqlen and kernel with each kernel's ratio to FA4 and to FlexAttention; for CP, TFLOPs/s/GPU by
cp size and strategy with MagiAttention's ratio to the best baseline. A ratio within 3% of 1.0
is a tie. An experiment whose rows come from several commits is listed, not tabulated: its
numbers are not one measurement.
"""
from __future__ import annotations

import argparse
import difflib
import sys
import tomllib
from pathlib import Path

import pandas as pd
from omegaconf import OmegaConf

from bench import mdgen
from bench.barplot import label_x
from bench.machine import parse_pairs
from bench.published import ROOT, RunInfo, published_files, run_info
from bench.results import LOCAL_KERNEL, latest_rows, read_results, seqlen_per_gpu
from bench.status import NOT_MEASURED, with_missing

__all__ = ["TIE", "PEERS", "ratio_text", "render", "headline", "main"]

TIE = 0.03  # a ratio within 3% of 1.0 is a tie: run-to-run spread of one cell is ~1-3%
PEERS = ("fa4", "flex")  # the kernel ratios' denominators
CP_REFERENCE = "magi"
# CP rows that are no baseline of magi: its own variants and the local kernel alone (cp 1)
CP_NOT_BASELINES = ("single_gpu",)
# (hardware, experiment, seqlen) of the README table: the first of these that is one run
HEADLINES = (("h200", "kernel_masks", 16384), ("h100", "kernel_masks", 16384))
DOC = ROOT / "docs" / "results.md"
README = ROOT / "README.md"
VERSIONS_SHOWN = ("driver", "cuda", "torch", "triton", "cudnn", "flash_attn_4", "flashinfer",
                  "fa3_fwd", "cudnn_frontend")


def ratio_text(ratio: float) -> str:
    """``1.23x``; ``tie (1.02x)`` within TIE of 1.0."""
    if pd.isna(ratio):
        return "-"
    # judged on the value shown, so that "0.97x" is a tie as the text says
    return f"tie ({ratio:.2f}x)" if abs(round(ratio, 2) - 1.0) <= TIE + 1e-9 else f"{ratio:.2f}x"


def _cell(row) -> str:
    if row is None or row["status"] == NOT_MEASURED:
        return "not measured"
    if row["status"] != "ok":
        return f"X ({row['status']})"
    return f"{row['tflops_per_s']:.4g}" if pd.notna(row["tflops_per_s"]) else "-"


def _markdown(header: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(map(str, r)) + " |" for r in body]
    return "\n".join(lines)


def _rel(path: Path, root: Path = ROOT) -> str:
    try:
        return path.resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:  # a file outside the checkout (tests)
        return str(path)


def _link(path: Path, root: Path = ROOT) -> str:
    return f"../{_rel(path, root)}"


def _release() -> str:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)["project"]["version"]


def _machine(rows: pd.DataFrame) -> str:
    first = rows.iloc[0]
    parts = [str(first.get("gpu_name", ""))]
    versions = parse_pairs(first.get("versions", "") if pd.notna(first.get("versions")) else "")
    if not versions and pd.notna(first.get("torch_version")):
        versions = {"torch": str(first["torch_version"])}
    parts += [f"{k} {versions[k]}" for k in VERSIONS_SHOWN if k in versions]
    clocks = parse_pairs(first.get("gpu_clocks", "") if pd.notna(first.get("gpu_clocks")) else "")
    if clocks:
        parts.append("clocks " + ", ".join(f"{k}={v}" for k, v in clocks.items()))
    return "; ".join(p for p in parts if p)


def _state_line(info: RunInfo) -> str:
    if info.state == "current":
        return "State: **current** (no measured code changed since this commit)."
    if info.state == "stale":
        files = ", ".join(f"`{f}`" for f in info.stale[:6])
        more = f" and {len(info.stale) - 6} more" if len(info.stale) > 6 else ""
        return (f"State: **stale**: measured code changed since this commit ({files}{more}); "
                "the numbers are those of the commit named, not of this checkout.")
    return {"dirty": "State: **dirty**: measured on code that differed from its commit.",
            "inferred": "State: **inferred commit**: the rows name the commit they were most "
                        "likely measured at (recorded after the fact).",
            "unknown": "State: **unknown**: this checkout's git does not know the commit."
            }.get(info.state, f"State: {info.state}.")


def _remeasure(info: RunInfo, rows: pd.DataFrame, root: Path = ROOT) -> str:
    preset = str(rows["hardware"].iloc[0]) if not rows.empty else info.hardware
    rel = _rel(info.path, root)
    if info.kind == "kernels":
        run = (f"python -m bench.kernels experiment={info.experiment} hardware={preset} "
               f"out_dir=results/{info.hardware} report=false")
    else:
        run = (f"torchrun --nproc-per-node <gpus> -m bench.cp experiment={info.experiment} "
               f"hardware={preset} out_dir=results/{info.hardware} report=false")
    return f"`git rm {rel} && {run}`"


def recipe_cells(experiment: str, root: Path = ROOT) -> dict[str, tuple[list[str], list[int]]]:
    """What a kernel recipe (configs/experiment/<experiment>.yaml) asks for: per mask label its
    kernels and seqlens; {} when there is no such recipe (a user's own experiment)."""
    path = root / "configs" / "experiment" / f"{experiment}.yaml"
    if not path.exists():
        return {}
    recipe = OmegaConf.to_container(OmegaConf.load(path))
    chosen = {}
    for entry in recipe.get("defaults", []):
        if isinstance(entry, dict):
            for key, value in entry.items():
                chosen[key.replace("override ", "").strip("/")] = value
    kernels = list(chosen.get("kernel") or [])
    seqlens = list(recipe.get("seqlens") or [])
    masks = {m: (kernels, seqlens) for m in (chosen.get("mask") or [])}
    for label, spec in (recipe.get("mask") or {}).items():
        masks[label] = (kernels, list((spec or {}).get("seqlens") or seqlens))
    return masks if kernels and seqlens else {}


def _with_recipe(rows: pd.DataFrame, experiment: str, root: Path = ROOT) -> pd.DataFrame:
    """``rows`` plus a ``not measured`` row for every cell the recipe asks for that has none,
    in both directions, so that a run that stopped early shows what it left."""
    asked = recipe_cells(experiment, root)
    have = set(zip(rows["mask"], rows["seqlen"], rows["kernel"], rows["direction"]))
    extra = [{"mask": m, "seqlen": s, "kernel": k, "direction": d, "status": NOT_MEASURED,
              "tflops_per_s": float("nan"), "message": ""}
             for m, (kernels, seqlens) in asked.items() for s in seqlens for k in kernels
             for d in ("fwd", "bwd") if (m, s, k, d) not in have]
    return pd.concat([rows, pd.DataFrame(extra)], ignore_index=True) if extra else rows


def _kernel_tables(info: RunInfo, rows: pd.DataFrame, root: Path = ROOT) -> list[str]:
    rows = _with_recipe(rows, info.experiment, root)
    plots = _plots_dir(info, root)
    out = []
    missing = rows[rows["status"] == NOT_MEASURED]
    if len(missing):
        masks = sorted(set(missing["mask"]))
        out.append(f"Not measured: {len(missing)} cells of the recipe "
                   f"(`configs/experiment/{info.experiment}.yaml`), in {', '.join(masks)}: the "
                   f"run stopped early. It is completed at its own commit by the same command "
                   f"there (a rerun skips the cells done), or measured again whole.\n")
    for (mask, direction), group in rows.groupby(["mask", "direction"], sort=True):
        kernels = list(dict.fromkeys(group["kernel"]))
        cells = {(r["seqlen"], r["kernel"]): r for r in group.to_dict("records")}
        seqlens = sorted(group["seqlen"].unique())
        figure = plots / mask / direction / "flops_report.png"
        link = f" ([figure]({_link(figure, root)}))" if figure.exists() else ""
        out.append(f"#### {mask} {direction}{link}\n")
        body = [[str(s)] + [_cell(cells.get((s, k))) for k in kernels] for s in seqlens]
        out.append("TFLOPs/s\n\n" + _markdown(["seqlen", *kernels], body) + "\n")
        peers = [p for p in PEERS if p in kernels]
        ran = [p for p in peers if (group[group["kernel"] == p]["status"] == "ok").any()]
        if peers and not ran:  # a table of dashes says nothing
            out.append(f"No ratios: {' / '.join(peers)} ran at no seqlen here.\n")
        peers = ran
        if peers:
            ratio_body = []
            for s in seqlens:
                line = [str(s)]
                for k in kernels:
                    line.append(" / ".join(_ratio(cells.get((s, k)), cells.get((s, p)))
                                           for p in peers))
                ratio_body.append(line)
            out.append(f"Ratio to {' / '.join(peers)}\n\n"
                       + _markdown(["seqlen", *kernels], ratio_body) + "\n")
    return out


def _ratio(row, peer) -> str:
    if row is None or peer is None or row["status"] != "ok" or peer["status"] != "ok":
        return "-"
    if not (pd.notna(row["tflops_per_s"]) and pd.notna(peer["tflops_per_s"])) or \
            peer["tflops_per_s"] <= 0:
        return "-"
    return ratio_text(row["tflops_per_s"] / peer["tflops_per_s"])


def _cp_tables(rows: pd.DataFrame) -> list[str]:
    rows = rows[rows["cp_size"].notna()].copy()
    rows["cp_size"] = rows["cp_size"].astype(int)
    rows["seqlen_per_gpu"] = seqlen_per_gpu(rows)
    if LOCAL_KERNEL not in rows:
        rows[LOCAL_KERNEL] = ""
    out = []
    keys = [LOCAL_KERNEL, "seqlen_per_gpu", "mask", "direction"]
    for (local, per_gpu, mask, direction), group in rows.groupby(keys, sort=True):
        strategies = list(dict.fromkeys(group["kernel"]))
        cells = {(r["cp_size"], r["kernel"]): r for r in group.to_dict("records")}
        sizes = sorted(group["cp_size"].unique())
        baselines = [s for s in strategies
                     if s != CP_REFERENCE and not s.startswith(CP_REFERENCE + "_")
                     and s not in CP_NOT_BASELINES]
        body = []
        for n in sizes:
            line = [str(n)] + [_cell(cells.get((n, s))) for s in strategies]
            best = max(((cells[(n, b)]["tflops_per_s"], b) for b in baselines
                        if (n, b) in cells and cells[(n, b)]["status"] == "ok"
                        and pd.notna(cells[(n, b)]["tflops_per_s"])), default=None)
            magi = cells.get((n, CP_REFERENCE))
            if best is None or magi is None or magi["status"] != "ok":
                line.append("-")
            else:
                line.append(f"{ratio_text(magi['tflops_per_s'] / best[0])} vs {best[1]}")
            body.append(line)
        local_text = f", local {local}" if local else ""
        out.append(f"#### {mask} {direction}, {label_x(int(per_gpu))} tokens/GPU{local_text}\n")
        out.append(_markdown(["cp_size", *strategies, "magi / best baseline"], body) + "\n")
    return out


def _plots_dir(info: RunInfo, root: Path = ROOT) -> Path:
    return Path(root) / "plots" / info.hardware / info.kind / info.experiment


def _experiment_section(info: RunInfo, rows: pd.DataFrame, root: Path = ROOT) -> list[str]:
    """One experiment's part of the page; ``root`` the checkout whose recipes, plots and
    paths it names."""
    rel = _rel(info.path, root)
    out = [f"### {info.hardware} · {info.kind} · {info.experiment}\n",
           f"File: [`{rel}`]({_link(info.path, root)}), {len(rows)} rows."]
    if not info.one_run:
        listed = "; ".join(f"`{sha}` ({n} rows)" for sha, n in info.commits)
        out.append(f"**Not one run**: its rows come from {len(info.commits)} commits ({listed}), "
                   f"{info.first_time[:10]} to {info.last_time[:10]}. No figure or table is "
                   f"drawn from them. Measure it again into an empty file: "
                   f"{_remeasure(info, rows, root)}.\n")
        return out
    out.append(f"Measured at commit `{info.commit}` on {info.date} ({_machine(rows)}).")
    out.append(_state_line(info) + "\n")
    latest = with_missing(latest_rows(rows))
    if info.kind == "kernels":
        return out + _kernel_tables(info, latest, root)
    return out + _cp_tables(latest)


def _index(infos: list[tuple[RunInfo, pd.DataFrame]]) -> str:
    body = []
    for info, rows in infos:
        run = f"`{info.commit}` ({info.date})" if info.one_run else f"{len(info.commits)} commits"
        body.append([info.hardware, info.kind, f"[{info.experiment}](#{_anchor(info)})",
                     str(len(rows)), run, info.state])
    return _markdown(["hardware", "kind", "experiment", "rows", "run", "state"], body)


def _anchor(info: RunInfo) -> str:
    # GitHub's heading anchors: lower case, spaces to '-', other punctuation dropped
    text = f"{info.hardware} · {info.kind} · {info.experiment}".lower()
    return "".join(c for c in text.replace(" ", "-") if c.isalnum() or c in "-_")


def _read(path: Path) -> pd.DataFrame:
    return read_results([path])


def _predicted_section(root: Path = ROOT) -> str:
    try:
        from bench.cp.predict.report import results_section
    except ImportError:
        return ""
    return results_section(root)


def render(root: Path = ROOT) -> str:
    """The whole text of docs/results.md."""
    infos = []
    for hardware, kind, path in published_files(root / "results"):
        rows = _read(path)
        infos.append((run_info(path, kind, rows, root), rows))
    parts = [
        "# Reference results",
        "",
        "<!-- Generated by `python -m bench.report docs` from results/; do not edit. -->",
        f"Release {_release()}. Every number below is read from a published results "
        "file (`results/<hardware>/<kernels|cp>/<experiment>.csv`); each experiment is one run "
        "at one commit, named with its date and machine. A ratio within 3% of 1.0 is shown as "
        "a tie. *Stale* means code that the rows measured (the kernels or the harness) changed "
        "after their commit: the numbers are that commit's. X cells did not run, with the "
        "status: `unsupported` (a limit of the kernel), `missing` (its package is not "
        "installed on that machine), `oom`, `error`, `wrong` (failed the correctness gate).",
        "",
        "## Index",
        "",
        _index(infos),
        "",
    ]
    for kind, title in (("kernels", "Kernels (one GPU)"), ("cp", "Context parallelism")):
        chosen = [(i, r) for i, r in infos if i.kind == kind]
        if chosen:
            parts += [f"## {title}", ""]
            for info, rows in chosen:
                parts += _experiment_section(info, rows, root) + [""]
    predicted = _predicted_section(root)
    if predicted:
        parts += [predicted.rstrip(), ""]
    return "\n".join(parts).rstrip() + "\n"


def headline(root: Path = ROOT) -> str:
    """The README's table: FFA (Triton and FA4 backends) against FA4 and Flex on the first
    headline experiment that is one run with every cell of its recipe measured (a run still
    being completed does not displace a whole one), at one seqlen, forward and backward; or a
    pointer."""
    for hardware, experiment, seqlen in HEADLINES:
        path = root / "results" / hardware / "kernels" / f"{experiment}.csv"
        if not path.exists():
            continue
        rows = _read(path)
        info = run_info(path, "kernels", rows, root)
        if info.one_run and not (_with_recipe(rows, experiment, root)["status"]
                                 == NOT_MEASURED).any():
            return _headline_table(info, rows, hardware, seqlen)
    return "No headline experiment is one whole run yet; see [docs/results.md](docs/results.md)."


def _headline_table(info: RunInfo, rows: pd.DataFrame, hardware: str, seqlen: int) -> str:
    latest = with_missing(latest_rows(rows))
    latest = latest[latest["seqlen"] == seqlen]
    body = []
    for (mask, direction), group in latest.groupby(["mask", "direction"], sort=True):
        cells = {r["kernel"]: r for r in group.to_dict("records")}
        line = [mask, direction]
        for kernel in ("ffa", "ffa_fa4"):
            row = cells.get(kernel)
            line.append(_cell(row))
            line.append(" / ".join(_ratio(row, cells.get(p)) for p in PEERS))
        body.append(line)
    note = (f"{hardware.upper()}, {seqlen // 1024}k tokens, GQA 64:8, head_dim 128, bf16, "
            f"TFLOPs/s and the ratio to FA4 / FlexAttention; commit `{info.commit}` "
            f"({info.date}), {info.state}. All masks, seqlens and peers: "
            f"[docs/results.md](docs/results.md).")
    return note + "\n\n" + _markdown(
        ["mask", "dir", "FFA (Triton)", "vs FA4 / Flex", "FFA (FA4)", "vs FA4 / Flex"], body)


def _check(path: Path, expected: str) -> bool:
    current = path.read_text() if path.exists() else ""
    if current == expected:
        return True
    diff = difflib.unified_diff(current.splitlines(), expected.splitlines(), str(path),
                                "generated", n=0, lineterm="")
    print(f"{path} is not what the results give; run `python -m bench.report docs`:")
    for line in list(diff)[:20]:
        print("  " + line)
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.report docs",
                                     description="Write docs/results.md (and the README's "
                                                 "headline table) from results/.")
    parser.add_argument("--check", action="store_true",
                        help="only compare; exit 1 when a file differs from what it would be")
    args = parser.parse_args(argv)
    page = render()
    readme = mdgen.render(README.read_text(), {"headline": lambda: headline()})
    if args.check:
        ok = _check(DOC, page) & _check(README, readme)
        print("docs/results.md and the README headline are current" if ok else "")
        return 0 if ok else 1
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(page)
    README.write_text(readme)
    print(f"wrote {DOC.relative_to(ROOT)} and the README headline")
    return 0


if __name__ == "__main__":
    sys.exit(main())
