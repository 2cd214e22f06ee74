"""tools/device/gpu_session.sh pack-caches / unpack-caches: the compiled-kernel caches of one
device machine go back as $OUT/cache_N.tgz and come back whole on the next one (here: folders
named by CACHE_DIRS, removed between the two)."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "device" / "gpu_session.sh"


def _session(*args, env):
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True,
                          timeout=60)


def test_packed_caches_unpack_to_the_same_files(tmp_path):
    if shutil.which("tar") is None:
        pytest.skip("no tar")
    caches = [tmp_path / "triton" / "cache", tmp_path / "inductor", tmp_path / "absent"]
    for i, folder in enumerate(caches[:2]):
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / f"kernel{i}.cubin").write_bytes(bytes(range(256)) * (i + 1))
    out, carried = tmp_path / "out", tmp_path / "carried"
    out.mkdir()
    env = {**os.environ, "OUT": str(out), "RUNS": str(tmp_path / "runs"),
           "CACHE_DIRS": ":".join(map(str, caches))}
    packed = _session("pack-caches", env=env)
    assert packed.returncode == 0, packed.stderr
    # one file per cache that exists, numbered by its place in the list
    assert sorted(p.name for p in out.iterdir()) == ["cache_1.tgz", "cache_2.tgz"]
    shutil.copytree(out, carried)
    for folder in caches[:2]:
        shutil.rmtree(folder)
    unpacked = _session("unpack-caches", str(carried), env=env)
    assert unpacked.returncode == 0, unpacked.stderr
    assert (caches[0] / "sub" / "kernel0.cubin").read_bytes() == bytes(range(256))
    assert (caches[1] / "sub" / "kernel1.cubin").read_bytes() == bytes(range(256)) * 2
    assert not caches[2].exists()
