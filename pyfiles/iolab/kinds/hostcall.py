"""Each kind's host call, by its bench role: the one place both run routes take a run's commands from.

    host_call(role, python, host, run_dir, play, drop, kind_vars) → HostCall

`kind_vars` are the role's variables without their prefix (bench_pytorch_target → target), as the controller gives
them (iolab.drive.execute.workload_vars). The fan-out (iolab.drive.fanout_run) runs the call as one command per host;
the bench role's tasks run the same argvs through its filter plugin (roles/bench_<tool>/filter_plugins), which calls
this with the role's variables. A kind without a call here runs through Ansible only (iolab.drive.fanout.refusal).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from iolab.kinds.calibrate import workload as calibrate
from iolab.kinds.checkpoint import workload as checkpoint
from iolab.kinds.dlio import workload as dlio
from iolab.kinds.fio import workload as fio
from iolab.kinds.kvcache import workload as kvcache
from iolab.kinds.metadata import workload as metadata
from iolab.kinds.objects import workload as objects
from iolab.kinds.pytorch import workload as pytorch
from iolab.kinds.replay import workload as replay
from iolab.kinds.tensorflow import workload as tensorflow
from iolab.workloads.base import At, HostCall, Play


class Kind(NamedTuple):
    """A kind's host call, the role variables it takes (by name, without the role's prefix), and what its bench role
    must copy to a host first, which a call's argv cannot carry (`copied(variables)`: why, or None)."""

    call: Callable[..., HostCall]
    names: tuple[str, ...]
    copied: Callable[[dict[str, Any]], str | None] | None = None


KINDS: dict[str, Kind] = {
    "bench_fio": Kind(fio.host_call, fio.FIO_VARS, fio.copied),
    "bench_pytorch": Kind(pytorch.host_call, pytorch.PYTORCH_VARS),
    "bench_tensorflow": Kind(tensorflow.host_call, tensorflow.TENSORFLOW_VARS),
    "bench_metadata": Kind(metadata.host_call, metadata.METADATA_VARS),
    "bench_calibrate": Kind(calibrate.host_call, calibrate.CALIBRATE_VARS),
    "bench_kvcache": Kind(kvcache.host_call, kvcache.KVCACHE_VARS),
    "bench_objects": Kind(objects.host_call, objects.OBJECTS_VARS),
    "bench_checkpoint": Kind(checkpoint.host_call, checkpoint.CHECKPOINT_VARS),
    "bench_replay": Kind(replay.host_call, replay.REPLAY_VARS, replay.copied),
    "bench_dlio": Kind(dlio.host_call, dlio.DLIO_VARS),
    "bench_mlperf_kvcache": Kind(kvcache.reference_call, kvcache.MLPERF_KVCACHE_VARS),
}


def kind_vars(variables: dict[str, Any]) -> dict[str, Any]:
    """The run's role variables (run_role's, bench_<tool>_*) without their prefix."""
    prefix = f"{variables['run_role']}_"
    return {k.removeprefix(prefix): v for k, v in variables.items() if k.startswith(prefix)}


def host_call(
    role: str,
    python: str,
    host: str,
    run_dir: str,
    play: Play | dict[str, Any],
    drop: bool,
    variables: dict[str, Any],
) -> HostCall:
    """`host`'s call for a run of `role` (a key of KINDS) in `run_dir`, the caches dropped before it (`drop`, the
    run's cache policy); `play` as a Play or, from a role, its fields as a mapping."""
    return KINDS[role].call(
        At(python, host, run_dir, play if isinstance(play, Play) else Play(**play), drop), **variables
    )
