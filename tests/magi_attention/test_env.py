"""MAGI_ATTENTION_LOG_LEVEL sets the magi_attention logger's level at import; a bad name is a
clear error. Fresh interpreters: the variable is read once, at import."""
import os
import subprocess
import sys

import pytest

CODE = ("import logging, magi_attention.functional; "
        "print(logging.getLevelName(logging.getLogger('magi_attention').level))")


def _run(level):
    env = {k: v for k, v in os.environ.items() if k != "MAGI_ATTENTION_LOG_LEVEL"}
    if level is not None:
        env["MAGI_ATTENTION_LOG_LEVEL"] = level
    return subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("level,expect", [(None, "WARNING"), ("debug", "DEBUG"), ("ERROR", "ERROR")])
def test_log_level_is_applied(level, expect):
    res = _run(level)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == expect


def test_bad_log_level_names_the_variable():
    res = _run("LOUD")
    assert res.returncode != 0 and "MAGI_ATTENTION_LOG_LEVEL must be a logging level" in res.stderr
