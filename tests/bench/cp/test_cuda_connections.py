"""init_distributed gives a CUDA run one hardware work queue (the Slurm launcher's setting) before
it makes the CUDA context, unless the environment already says otherwise; a CPU run is left
alone. The CUDA calls are stood in for (this machine has no GPU): what is checked is the
variable's value at the moment the context would be made."""
import pytest
import torch
import torch.distributed as dist

from bench.cp import runner


@pytest.fixture
def fake_cuda(monkeypatch):
    seen = {}
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: seen.get("initialised", False))
    monkeypatch.setattr(torch.cuda, "set_device", lambda index: seen.setdefault(
        "at_set_device", runner.os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS")))
    monkeypatch.delenv("RANK", raising=False)
    # set first so that monkeypatch restores the variable's absence after the test, whatever
    # init_distributed wrote into os.environ
    monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "unset")
    monkeypatch.delenv("CUDA_DEVICE_MAX_CONNECTIONS")
    monkeypatch.setattr(dist, "HashStore", lambda: None)
    return seen


def test_cuda_run_gets_one_queue_before_the_context(fake_cuda):
    assert runner.init_distributed("cuda")
    assert fake_cuda["at_set_device"] == "1"


def test_a_value_in_the_environment_wins(fake_cuda, monkeypatch):
    monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "8")
    runner.init_distributed("cuda")
    assert fake_cuda["at_set_device"] == "8"


def test_too_late_is_said_and_nothing_is_set(fake_cuda, caplog):
    fake_cuda["initialised"] = True
    runner.init_distributed("cuda")
    assert fake_cuda["at_set_device"] is None
    assert "CUDA_DEVICE_MAX_CONNECTIONS" in caplog.text


def test_cpu_run_is_left_alone(fake_cuda):
    runner.init_distributed("cpu")
    assert "at_set_device" not in fake_cuda
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in runner.os.environ
