"""One fio option policy: what a user's job file may not hold, a workload's options over a profile may not either."""

from __future__ import annotations

import pytest

from iolab.shared import fio_jobfile, fio_options


@pytest.mark.parametrize("name", sorted(name for name in fio_jobfile.REFUSED if "-" not in name))
def test_every_option_refused_in_a_job_file_is_refused_over_a_profile(name, tmp_path):
    job = tmp_path / "job.fio"
    job.write_text(f"[job]\n{name}=1\n")
    with pytest.raises(ValueError, match=f"{name} {fio_jobfile.REFUSED[name]}"):
        fio_jobfile.check(fio_jobfile.load(job))
    with pytest.raises(ValueError, match=f"fio option {name}='1' is not allowed: it {fio_jobfile.REFUSED[name]}"):
        fio_options.profile_options("seq-read-1m", {name: "1"})
