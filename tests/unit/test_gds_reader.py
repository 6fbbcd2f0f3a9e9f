"""reader npz through GPUDirect Storage (iolab.host.loader.gds_reader) without a GPU: where the array lies in an
NPZ file, the one-line refusal where kvikio or a GPU is missing, and what is recorded of kvikio's path — through
stand-ins for kvikio's module (FakeKvikio: kvikio needs CUDA, which this machine lacks)."""

from __future__ import annotations

import subprocess
import sys
import types

import numpy as np
import pytest

from iolab.host.loader import gds_reader


def test_the_array_of_a_stored_npz_member_is_found_at_its_offset(tmp_path):
    path = tmp_path / "s.npz"
    x = np.arange(3 * 5 * 7, dtype=np.uint16).reshape(3, 5, 7)
    np.savez(path, x=x, y=np.array([4], np.uint8))  # as the unet3d data set is written: stored, not compressed
    offset, nbytes, shape, dtype = gds_reader.npz_member(path)
    assert (nbytes, shape, dtype) == (x.nbytes, (3, 5, 7), "<u2")
    with open(path, "rb") as f:
        f.seek(offset)
        assert f.read(nbytes) == np.load(path)["x"].tobytes()


def test_a_compressed_member_is_refused(tmp_path):
    path = tmp_path / "c.npz"
    np.savez_compressed(path, x=np.zeros(1000, np.uint8))
    with pytest.raises(ValueError, match="x.npy is compressed; cuFile can read only a stored"):
        gds_reader.npz_member(path)


def test_without_kvikio_the_loader_refuses_gds_in_one_line_before_any_rank_starts(tmp_path):
    pytest.importorskip("torch")
    argv = [sys.executable, "-m", "iolab.kinds.pytorch.host", "--root", str(tmp_path), "--out", str(tmp_path)]
    done = subprocess.run([*argv, "--reader", "npz", "--gds"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "gds: true needs kvikio" in line and "pip install kvikio-cu12" in line
    done = subprocess.run([*argv, "--reader", "pil", "--gds"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--gds reads unet3d's NPZ files into the GPU: it needs --reader npz" in done.stderr


class FakeKvikio(types.SimpleNamespace):
    """A stand-in for kvikio's module: its defaults and the cuFile driver's properties, as a release spells them."""


def fake(compat: str, gds: bool, old: bool = False) -> FakeKvikio:
    properties = types.SimpleNamespace(is_gds_available=gds)
    if old:  # kvikio ≤ 24: defaults.compat_mode() a bool, kvikio.DriverProperties()
        defaults = types.SimpleNamespace(compat_mode=lambda: compat == "ON")
        return FakeKvikio(__version__="24.10.0", defaults=defaults, DriverProperties=lambda: properties)
    defaults = types.SimpleNamespace(
        get=lambda key: types.SimpleNamespace(name=compat), is_compat_mode_preferred=lambda: compat == "ON"
    )
    return FakeKvikio(
        __version__="26.10.0", defaults=defaults, cufile_driver=types.SimpleNamespace(properties=properties)
    )


def test_gds_is_claimed_only_when_kvikio_ran_cufile_and_the_driver_had_gds():
    assert gds_reader.facts(fake("OFF", True)) == {
        "kvikio": "26.10.0",
        "compat_mode": "OFF",
        "posix_fallback": False,
        "gds_available": True,
        "gpu_direct": True,
    }
    posix = gds_reader.facts(fake("ON", True))  # kvikio's compatibility mode: POSIX reads, whatever the driver says
    assert (posix["compat_mode"], posix["posix_fallback"], posix["gpu_direct"]) == ("ON", True, False)
    assert gds_reader.facts(fake("OFF", False))["gpu_direct"] is False  # cuFile without nvidia-fs: its own compat
    older = gds_reader.facts(fake("ON", True, old=True))
    assert (older["compat_mode"], older["posix_fallback"], older["gpu_direct"]) == ("True", True, False)
