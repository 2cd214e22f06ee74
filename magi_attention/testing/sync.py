"""A GPU test's proof that a call neither copies to the host nor synchronises."""
from __future__ import annotations

import torch


def assert_no_sync(fn) -> None:
    """Run fn under torch's sync debug mode set to error: a device-to-host copy or a stream
    synchronisation inside raises RuntimeError."""
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        fn()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
