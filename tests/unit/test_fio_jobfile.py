"""Users' fio job files: parsed as fio reads them, confined to the backend's target (issue 12).

Real fio where fio's own behaviour is compared (--parse-only, --cmdhelp, the host-side prepare).
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from iolab.campaign import model as campaign
from iolab.errors import UserError
from iolab.kinds.fio import host as fio_jobs
from iolab.kinds.fio import workload as fio
from iolab.shared import fio_jobfile

needs_fio = pytest.mark.skipif(shutil.which("fio") is None, reason="needs fio")


def jobfile(tmp_path: Path, text: str, name: str = "jf.fio") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def load(tmp_path: Path, job: Path, backends: list | None = None) -> campaign.Campaign:
    """A campaign running `job` on `backends` (default: a tmpfs), loaded as `./lab bench.all` loads it."""
    data = {
        "name": "t",
        "backends": backends or [{"name": "mem", "type": "tmpfs", "size": "64MiB"}],
        "workloads": [{"name": "mine", "type": "fio", "jobfile": job.name}],
    }
    path = tmp_path / "c.yml"
    path.write_text(yaml.safe_dump(data))
    return campaign.load(path)


def refused(tmp_path: Path, text: str, backends: list | None = None) -> str:
    with pytest.raises(UserError) as err:
        load(tmp_path, jobfile(tmp_path, text), backends)
    message = str(err.value)
    assert "\n" not in message
    return message


def scratch(tmp_path: Path, **fields) -> dict:
    (tmp_path / "disk").mkdir(exist_ok=True)
    return {"name": "disk", "type": "local", "path": str(tmp_path / "disk"), **fields}


# --- the reproductions of issue 12 -------------------------------------------------------------


def test_an_included_exec_prerun_is_refused_naming_the_included_file(tmp_path):
    marker = tmp_path / "pwned"
    (tmp_path / "inc.fio").write_text(f"exec_prerun=touch {marker}\n")
    message = refused(tmp_path, "[j]\nrw=read\nsize=4m\ninclude inc.fio\n")
    assert f"{tmp_path / 'inc.fio'}: [j] exec_prerun=touch {marker}: exec_prerun runs commands on the hosts" in message
    assert "workloads[0].jobfile" in message
    assert not marker.exists()


@pytest.mark.parametrize(
    "included, says",
    [
        ("AWS_SECRET_ACCESS_KEY=SECRETFAKE123\n", "creds:1: not a fio option (key=value or a bare flag)"),
        pytest.param(
            "aws_secret_access_key = SECRETFAKE123\n",
            "(fio: Bad option <aws_secret_access_key>)",
            marks=needs_fio,
        ),
    ],
)
def test_an_included_file_that_is_no_job_file_is_refused_without_echoing_its_values(tmp_path, included, says):
    """`include` may name any file the campaign's author can read (a credentials file): name the line or
    the key, never the value."""
    (tmp_path / "creds").write_text(included)
    message = refused(tmp_path, "[j]\nrw=read\nsize=4m\ninclude creds\n")
    assert says in message and "SECRETFAKE123" not in message


@pytest.mark.parametrize(
    "text, says",
    [
        ("[j]\nfilename=/srv/precious\nunlink=1\n", "[j] filename=/srv/precious: fio may only use relative paths"),
        ("[j]\nfilename=/dev/sda\nrw=write\n", "allow_devices of every backend"),
        ("[j]\nrw=read\nwrite_bw_log=/tmp/x\n", "[j] write_bw_log=/tmp/x: fio may only use relative paths"),
        ("[j]\nfilename=${HOME}/x\n", "replace ${...} with the host's environment"),
        ("[j]\nrw=read\ndescription=${HOME}\n", "replace ${...}"),
        ("[j]\nfilename=$HOME/x\n", "fio would expand '$' on the host"),
        ("[j]\nfilename=data:../../etc/passwd\n", "remove '..'"),
        ("[j]\ndirectory=/etc\n", "[j] directory=/etc: fio may only use relative paths"),
        ("[j]\nopendir=/home\n", "opendir=/home"),
        ("[j]\nread_iolog=/var/log/trace\n", "read_iolog=/var/log/trace"),
        ("[j]\nreplay_redirect=/dev/sdb\n", "replay_redirect=/dev/sdb"),
        ("[j]\nfilename_format=/tmp/$jobname\n", "filename_format=/tmp/$jobname"),
        ("[j]\nbuffer_pattern='/etc/shadow'\n", "buffer_pattern='/etc/shadow'"),
        ("[j]\niomem=mmaphuge:/hugetlbfs/f\n", "iomem=mmaphuge:/hugetlbfs/f"),  # an alias of mem
        ("[j]\nfilename=-\n", "standard input or output"),
        ("[j]\nioengine=exec\n", "ioengine exec runs a program on the hosts"),
        ("[j]\nioengine=external:/tmp/engine.so\n", "loads code into fio"),
        ("[j]\nioengine=/tmp/engine.so\n", "loads code into fio"),
        ("[j]\nioengine=net\n", "ioengine net is not a file or block engine"),
        ("[j]\nioengine=http\n", "ioengine http is not a file or block engine"),
        ("[j]\nexec_postrun=reboot\n", "exec_postrun runs commands on the hosts"),
        ("[j]\nexec_prerun =id\n", "exec_prerun runs commands"),  # fio reads the key stripped
        ("[j]\nioscheduler=none\n", "changes the I/O scheduler"),
        ("[j]\ncgroup=../../x\n", "creates control groups"),
        ("[j]\nprofile=act\n", "built-in profiles"),
        ("[j]\ntrigger-cmd=id\n", "runs commands on the hosts"),
        ("[../../etc/x]\nrw=read\n", "a section name may not contain '/'"),
        ("[j]\nname=../../etc/x\n", "a name may not contain '/'"),
        ("[j]\ndescription={{ lookup('pipe', 'id') }}\n", "Ansible would evaluate"),
        ("[j]\nrw=read\ninclude=inc.fio\n", "write include FILE"),
        ("rw=read\n[j]\n", "comes before any [section]"),
        ("[j]\ndescription=" + "x" * 8192 + "exec_prerun=id\n", "at most 8191 characters"),
    ],
)
def test_what_reaches_past_the_target_is_refused_in_one_line(tmp_path, text, says):
    assert says in refused(tmp_path, text)


def test_an_include_cycle_and_a_section_in_an_included_file_are_refused(tmp_path):
    (tmp_path / "a.fio").write_text("include b.fio\n")
    (tmp_path / "b.fio").write_text("include a.fio\n")
    assert "includes itself (jf.fio -> a.fio -> b.fio -> a.fio)" in refused(tmp_path, "[j]\ninclude a.fio\n")
    (tmp_path / "sec.fio").write_text("[k]\nrw=read\n")
    assert "an included file may not start a section" in refused(tmp_path, "[j]\ninclude sec.fio\n")
    for n in range(fio_jobfile.MAX_INCLUDE_DEPTH + 2):
        (tmp_path / f"d{n}.fio").write_text(f"include d{n + 1}.fio\n")
    (tmp_path / f"d{fio_jobfile.MAX_INCLUDE_DEPTH + 2}.fio").write_text("rw=read\n")
    assert "nest deeper than" in refused(tmp_path, "[j]\ninclude d0.fio\n")


@needs_fio
def test_the_hosts_get_the_checked_text_with_includes_inlined(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "inc.fio").write_text("bs=8k   ; a comment\ninclude more.fio\n")
    (tmp_path / "sub" / "more.fio").write_text("# nothing but\nsize=4m\n")
    job = jobfile(
        tmp_path,
        "; my job\n[global]\nrw=randread\n[j]\ninclude sub/inc.fio\nfilename=data\n"
        "filename_format=$jobname.$filenum\ntime_based\n",
    )
    workload = load(tmp_path, job).workloads[0]
    text = "[global]\nrw=randread\n[j]\nbs=8k\nsize=4m\nfilename=data\nfilename_format=$jobname.$filenum\ntime_based\n"
    assert workload.jobtext == text and workload.writes == ""
    variables = workload.role_vars("/mnt/iolab/mem")
    assert variables["bench_fio_jobtext"] == text and variables["bench_fio_allow_devices"] == []
    assert "bench_fio_jobfile" not in variables
    assert "jobtext" not in workload.model_dump()  # neither in a run's id nor in its params
    flat = jobfile(tmp_path, text, "flat.fio")
    assert subprocess.run(["fio", "--parse-only", str(flat)], capture_output=True).returncode == 0


def test_a_campaign_cannot_supply_the_checked_text_itself(tmp_path):
    path = tmp_path / "c.yml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "t",
                "backends": [{"name": "mem", "type": "tmpfs", "size": "64MiB"}],
                "workloads": [
                    {"name": "x", "type": "fio", "profile": "seq-read-1m", "jobtext": "[j]\nexec_prerun=id\n"}
                ],
            }
        )
    )
    with pytest.raises(UserError, match="jobtext is iolab's checked copy of jobfile"):
        campaign.load(path)


def test_fio_options_given_by_their_alias_are_checked_as_the_option(tmp_path):
    assert "readwrite=write" in refused(
        tmp_path,
        "[j]\nreadwrite=write\n",
        [{"name": "nas", "type": "mount", "source": "nas:/x", "fstype": "nfs", "readonly": True}],
    )


@needs_fio
def test_the_alias_table_is_fios_own():
    for alias, option in fio_jobfile.ALIASES.items():
        help_text = subprocess.run(["fio", f"--cmdhelp={option}"], capture_output=True, text=True).stdout
        assert f"alias: {alias}" in help_text, (alias, option)


# --- devices ---------------------------------------------------------------------------------------

DEVICE_JOB = "[j]\nfilename=/dev/full\nrw=write\nbs=4k\nsize=4k\n"


def test_a_device_needs_allow_devices_on_a_scratch_backend_and_only_that_device(tmp_path):
    spec = load(tmp_path, jobfile(tmp_path, DEVICE_JOB), [scratch(tmp_path, allow_devices=["/dev/full"])])
    assert spec.workloads[0].role_vars("/x")["bench_fio_allow_devices"] == ["/dev/full"]
    assert "filename=/dev/full" in refused(tmp_path, DEVICE_JOB, [scratch(tmp_path, allow_devices=["/dev/null"])])
    assert "filename=/dev/full" in refused(tmp_path, DEVICE_JOB, [scratch(tmp_path)])
    # Every backend the job runs on must allow it.
    assert "allow_devices of every backend" in refused(
        tmp_path,
        DEVICE_JOB,
        [scratch(tmp_path, allow_devices=["/dev/full"]), {"name": "mem", "type": "tmpfs", "size": "64MiB"}],
    )
    # The sg engine only on allowed devices.
    sg_job = "[j]\nioengine=sg\nfilename=/dev/full\n"
    assert load(tmp_path, jobfile(tmp_path, sg_job), [scratch(tmp_path, allow_devices=["/dev/full"])])
    assert "the sg engine sends SCSI commands" in refused(
        tmp_path, "[j]\nioengine=sg\nfilename=data\n", [scratch(tmp_path, allow_devices=["/dev/full"])]
    )
    # An allowed device is a file name only: not a directory, nor a log.
    assert "directory=/dev/full" in refused(
        tmp_path, "[j]\ndirectory=/dev/full\n", [scratch(tmp_path, allow_devices=["/dev/full"])]
    )


@pytest.mark.parametrize(
    "backend, says",
    [
        (
            {
                "name": "nas",
                "type": "mount",
                "source": "nas:/x",
                "fstype": "nfs",
                "readonly": True,
                "allow_devices": ["/dev/sdb"],
            },
            "a readonly backend cannot have them",
        ),
        ({"name": "disk", "type": "local", "path": "/var/tmp", "allow_devices": ["/etc/passwd"]}, "is not a device"),
        (
            {"name": "disk", "type": "local", "path": "/var/tmp", "allow_devices": ["/dev/../etc/passwd"]},
            "without '..'",
        ),
        ({"name": "fs", "type": "cephfs", "allow_devices": ["/dev/sdb"]}, "allow_devices"),
    ],
)
def test_allow_devices_only_on_writable_backends_and_only_devices(tmp_path, backend, says):
    assert says in refused(tmp_path, "[j]\nrw=read\n", [backend])


def test_a_job_file_that_writes_is_refused_on_a_read_only_backend(tmp_path):
    message = refused(
        tmp_path,
        "[global]\nunlink=1\n[j]\nrw=read\n",
        [{"name": "nas", "type": "mount", "source": "nas:/x", "fstype": "nfs", "readonly": True}],
    )
    assert "writes (job file" in message and "[global] unlink=1" in message and "read-only" in message


def test_bench_fio_checks_a_job_file_given_as_profile(tmp_path, monkeypatch):
    (tmp_path / "inc.fio").write_text("exec_prerun=touch /tmp/never\n")
    job = jobfile(tmp_path, "[j]\nrw=read\ninclude inc.fio\n")
    spec = campaign.parse(
        {
            "name": "t",
            "backends": [{"name": "mem", "type": "tmpfs", "size": "64MiB"}],
            "workloads": [{"name": "s", "type": "fio", "profile": "seq-read-1m"}],
        },
        "t",
        tmp_path,
    )
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match=r"bench.fio flags: workloads\[0\].jobfile: .*exec_prerun runs commands"):
        campaign.parse(fio.single_run(spec.backends, None, str(job), "1s", "0s", None), "bench.fio flags", tmp_path)


# --- on the host ---------------------------------------------------------------------------------


def prepare(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    argv = [
        sys.executable,
        "-m",
        "iolab.kinds.fio.host",
        "prepare",
        "--dir",
        str(tmp_path / "run"),
        "--workdir",
        str(tmp_path / "work"),
        "--jobfile",
        str(tmp_path / "run" / "user.fio"),
        *extra,
    ]
    return subprocess.run(argv, capture_output=True, text=True)


@needs_fio
def test_a_job_files_text_in_the_argv_is_written_as_the_runs_user_fio_and_checked_again(tmp_path):
    """The fan-out's route (and the role's, for a text of up to iolab.workloads.base.INLINE_TEXT): the checked text
    travels in the prepare's argv; the host writes it as the run's user.fio and checks it as it checks that file."""
    marker = tmp_path / "pwned"
    argv = [sys.executable, "-m", "iolab.kinds.fio.host", "prepare", "--dir", str(tmp_path / "run")]
    argv += ["--workdir", str(tmp_path / "work"), "--jobtext", f"[j]\nrw=read\nsize=1m\nexec_prerun=touch {marker}\n"]
    done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == 1 and "exec_prerun runs commands on the hosts" in done.stderr
    assert (tmp_path / "run" / "user.fio").read_text().endswith(f"exec_prerun=touch {marker}\n")
    assert not marker.exists() and not (tmp_path / "run" / "job.fio").exists()
    argv[-1] = "[j]\nrw=read ; sequential\nsize=1m\nfilename=data\n"
    done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "run" / "fio_job.json").read_text())["jobfile"] == str(tmp_path / "run" / "user.fio")
    assert "filename=data" in (tmp_path / "run" / "job.fio").read_text()


@needs_fio
def test_the_host_refuses_a_tampered_job_file_before_fio_starts(tmp_path):
    marker = tmp_path / "pwned"
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "user.fio").write_text(f"[j]\nrw=read\nsize=1m\nexec_prerun=touch {marker}\n")
    done = prepare(tmp_path)
    assert done.returncode == 1 and "exec_prerun runs commands on the hosts" in done.stderr
    assert "Traceback" not in done.stderr
    assert not marker.exists() and not (tmp_path / "run" / "job.fio").exists()


@needs_fio
def test_the_host_refuses_a_name_that_leads_off_the_target_or_an_absent_device(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "work").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "work" / "link").symlink_to(tmp_path / "outside")
    (tmp_path / "run" / "user.fio").write_text("[j]\nrw=read\nsize=1m\nfilename=link/data\n")
    done = prepare(tmp_path)
    assert done.returncode == 1 and f"on this host it leads to {tmp_path / 'outside' / 'data'}" in done.stderr
    (tmp_path / "run" / "user.fio").write_text("[j]\nrw=read\nsize=1m\nfilename=/dev/iolab-none\n")
    done = prepare(tmp_path, "--allow-device", "/dev/iolab-none")
    assert done.returncode == 1 and "is not a block or character device on this host" in done.stderr
    (tmp_path / "run" / "user.fio").write_text("[j]\nrw=read\nsize=1m\nfilename=/dev/zero\n")
    assert "fio may only use relative paths" in prepare(tmp_path).stderr  # not allowed here


@needs_fio
def test_the_host_runs_the_text_it_checked(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "inc.fio").write_text("size=1m\n")
    (tmp_path / "run" / "user.fio").write_text("[j]\nrw=read ; sequential\ninclude inc.fio\nfilename=data\n")
    done = prepare(tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "run" / "job.fio").read_text() == "[j]\nrw=read\nsize=1m\nfilename=data\n"
    assert (tmp_path / "work" / "data").stat().st_size == 1 << 20  # laid out on the target
    assert json.loads((tmp_path / "run" / "fio_job.json").read_text())["jobfile"].endswith("user.fio")


def test_prepare_checks_a_job_file_given_in_python_too(tmp_path):
    (tmp_path / "user.fio").write_text("[j]\nwrite_iolog=/tmp/iolog\n")
    with pytest.raises(ValueError, match="write_iolog=/tmp/iolog"):
        fio_jobs.prepare(tmp_path / "run", tmp_path / "work", {}, 0, tmp_path / "user.fio")
