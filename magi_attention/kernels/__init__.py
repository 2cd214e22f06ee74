"""FFA kernel backends. Each backend module exposes ``fwd`` and ``bwd`` with the signatures of
``reference.fwd`` / ``reference.bwd`` (and optionally ``check_supported(q, k, v)`` and
``is_available()``); ``magi_attention.functional`` picks one."""


class BackendUnavailable(RuntimeError):
    """The backend cannot run here (package missing, no GPU, unsupported dtype or head_dim)."""
