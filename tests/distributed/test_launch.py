import sys

import pytest

from labkit.core.errors import LabkitValueError
from labkit.distributed.launch import torch_release, torchrun_command, torchrun_env


def test_torch_release_reads_local_and_prerelease_versions():
    assert torch_release("2.4.1+cu121") == (2, 4)
    assert torch_release("2.10.0a0+git123") == (2, 10)
    assert torch_release("1.13.1") == (1, 13)


@pytest.mark.parametrize(
    ("platform", "version", "expected"),
    [("win32", "2.4.0", "0"), ("win32", "2.3.1", None), ("linux", "2.6.0", None), ("darwin", "2.6.0", None)],
)
def test_windows_from_torch_2_4_launches_without_libuv(platform, version, expected):
    env = torchrun_env({"PATH": "x"}, platform=platform, version=version)
    assert env.get("USE_LIBUV") == expected and env["PATH"] == "x"


def test_a_libuv_setting_of_the_user_is_kept():
    assert torchrun_env({"USE_LIBUV": "1"}, platform="win32", version="2.5.0")["USE_LIBUV"] == "1"


def test_the_command_runs_torchrun_with_this_interpreter():
    assert torchrun_command("labkit.course.ddp_demo", ["--samples", 64], nproc=3) == [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=3",
        "-m",
        "labkit.course.ddp_demo",
        "--samples",
        "64",
    ]
    with pytest.raises(LabkitValueError, match="at least one rank"):
        torchrun_command("m", nproc=0)
