"""comm.stream_flag: the flag a stream writes (cuStreamWriteValue32). CPU: what it refuses and
why; GPU: the write lands after the work before it on its stream, and only then."""
import pytest
import torch

from magi_attention.comm.stream_flag import new_flag, stream_flag_reason, write_flag


def test_a_cpu_tensor_is_refused_with_the_reason():
    assert "CUDA" in stream_flag_reason(torch.device("cpu"))
    with pytest.raises(ValueError, match="CUDA"):
        write_flag(torch.zeros(1, dtype=torch.int32), 1)


@pytest.mark.parametrize("bad", [torch.zeros(1, dtype=torch.int64), torch.zeros(2, dtype=torch.int32)])
def test_a_flag_is_one_int32(bad):
    with pytest.raises(ValueError, match="one int32"):
        write_flag(bad, 1)


@pytest.mark.gpu
def test_the_stream_writes_the_flag_after_its_earlier_work():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU; run on the device machine")
    flag = new_flag(torch.device("cuda"))
    side = torch.cuda.Stream()
    seen = torch.zeros(1, dtype=torch.int32, device="cuda")
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # ~0.1 s of spinning on the side stream
        write_flag(flag, 7)
        seen.copy_(flag)  # after the write, on the same stream
    early = flag.clone()  # the current stream: the side stream's write has not happened yet
    torch.cuda.synchronize()
    assert early.item() == 0 and flag.item() == 7 and seen.item() == 7
    write_flag(flag, 0)
    torch.cuda.synchronize()
    assert flag.item() == 0
