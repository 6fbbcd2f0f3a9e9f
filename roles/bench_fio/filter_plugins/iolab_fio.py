"""The bench_fio role's commands, from iolab.drive.fanout.fio_argvs: the one place both run paths build them."""

from __future__ import annotations

from iolab.drive.fanout import fio_argvs


class FilterModule:
    def filters(self) -> dict:
        return {"iolab_fio_argvs": fio_argvs}
