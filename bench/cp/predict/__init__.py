"""Predicted CP step times at any scale: each strategy's own per-rank work and traffic, run
against a rate table of the local kernel (single-GPU rows) and a link model.

    python -m bench.cp.predict hardware=h100 'cp_sizes=[8,16,32,64]'    # rows, figures
    python -m bench.cp.predict.validation                               # against measured cells

One job per module: ``problem`` (a cell), ``submask`` (ring step masks), ``ops`` (programs,
areas and bytes), ``baselines`` and ``magi_programs`` (the strategies' programs), ``tiles``
(a call's tile counts), ``rates`` (the rate table), ``links`` (the link model), ``schedule``
(what overlaps what), ``predictor`` (one cell), ``config`` and ``__main__`` (Hydra),
``validation``, ``report`` and ``figures``.
"""
from .links import LinkModel, Topology
from .predictor import Models, Prediction, predict_cell
from .rates import RateModel, fit_rate_model

__all__ = ["LinkModel", "Topology", "Models", "Prediction", "predict_cell", "RateModel",
           "fit_rate_model"]
