"""FFA kernel backends. Each backend module exposes ``fwd`` and ``bwd`` with the signatures of
``reference.fwd`` / ``reference.bwd``; ``magi_attention.functional`` picks one."""
