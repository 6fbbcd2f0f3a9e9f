from pathlib import Path

import pytest
import yaml

from iolab import campaign
from iolab.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
GOOD = {
    "name": "t",
    "repetitions": 2,
    "backends": [{"name": "mem", "type": "tmpfs", "size": "256MiB"},
                 {"name": "disk", "type": "local", "path": "/var/tmp"}],
    "workloads": [{"name": "seq", "type": "fio", "profile": "seq-read-1m", "runtime": "2s"}],
}


def load(tmp_path: Path, data) -> campaign.Campaign:
    path = tmp_path / "c.yml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return campaign.load(path)


def with_(path: str, value):
    """GOOD with one value replaced, e.g. with_('backends.0.size', '0')."""
    import copy

    data = copy.deepcopy(GOOD)
    *head, last = path.split(".")
    node = data
    for key in head:
        node = node[int(key)] if key.isdigit() else node[key]
    node[int(last) if last.isdigit() else last] = value
    return data


def test_quick_campaign_loads_and_expands():
    spec = campaign.load(ROOT / "campaigns" / "quick.yml")
    runs = campaign.expand(spec)
    assert len(runs) == len(spec.backends) * len(spec.workloads) * spec.repetitions
    assert len({r.run_id for r in runs}) == len(runs)


def test_run_ids_are_stable_and_follow_the_configuration(tmp_path):
    first = [r.run_id for r in campaign.expand(load(tmp_path, GOOD))]
    again = [r.run_id for r in campaign.expand(load(tmp_path, GOOD))]
    assert first == again
    changed = [r.run_id for r in campaign.expand(load(tmp_path, with_("workloads.0.runtime", "3s")))]
    assert set(first).isdisjoint(changed)


def test_list_parameters_sweep_as_a_cartesian_product(tmp_path):
    spec = load(tmp_path, with_("workloads.0", {"name": "qd", "type": "fio", "profile": "rand-read-16k",
                                                "iodepth": [1, 8], "numjobs": [1, 2]}))
    runs = campaign.expand(spec)
    assert len(runs) == 2 * 4 * 2   # backends × sweep points × repetitions
    assert {(r.params["iodepth"], r.params["numjobs"]) for r in runs} == {(1, 1), (1, 2), (8, 1), (8, 2)}


def test_sizes_and_durations_take_units(tmp_path):
    spec = load(tmp_path, GOOD)
    assert spec.backends[0].size == 256 << 20
    assert spec.workloads[0].runtime == 2.0
    assert spec.backends[0].target == "/mnt/iolab/mem"


@pytest.mark.parametrize("data, message", [
    (with_("backends.0.sise", "1G"), "c.yml: backends[0].sise: unknown key (expected one of: name, type, size, mountpoint)"),
    (with_("colour", "blue"), "c.yml: colour: unknown key (expected one of: name, description, repetitions"),
    (with_("backends.0.type", "nfs9"), "c.yml: backends[0].type: unknown backend type 'nfs9' (expected one of: tmpfs, local, rbd_snapshot, cephfs, nfs, sshfs, mount, rbd)"),
    (with_("workloads.0.type", "mystery"), "c.yml: workloads[0].type: unknown workload type 'mystery'"),
    (with_("workloads.0.profile", "fast"), "c.yml: workloads[0]: unknown fio profile 'fast' (expected one of: seq-read-1m"),
    (with_("backends.0.size", "lots"), "c.yml: backends[0].size: expected a size such as 2GiB or 500MB, got 'lots'"),
    (with_("backends.0.size", "0GiB"), "c.yml: backends[0].size: a size must be positive, got '0GiB'"),
    (with_("backends.0.size", "2XB"), "c.yml: backends[0].size: unknown size unit 'xb'"),
    (with_("workloads.0.runtime", "soon"), "c.yml: workloads[0].runtime: expected a duration such as 10s or 2m"),
    (with_("workloads.0.runtime", 0), "c.yml: workloads[0].runtime: a duration must be positive"),
    (with_("repetitions", 0), "c.yml: repetitions: Input should be greater than or equal to 1"),
    (with_("backends.1.path", "var/tmp"), "c.yml: backends[1].path: 'var/tmp' must be an absolute path"),
    (with_("name", "../../etc"), "c.yml: name: '../../etc' is not a valid name"),
    (with_("name", "x; rm -rf /"), "c.yml: name: 'x; rm -rf /' is not a valid name"),
    (with_("backends.1.name", "mem"), "backend names must be unique; repeated: mem"),
    (with_("workloads.0.jobfile", "x.fio"), "give either profile"),
    (with_("backends.1.path", "/x/{{ lookup('pipe', 'id') }}"), "template markers"),
    ("name: [unclosed", "c.yml: not valid YAML at line 1"),
    ("- a\n- b\n", "c.yml: a campaign file must be a YAML mapping"),
    ("just words", "c.yml: a campaign file must be a YAML mapping"),
])
def test_bad_campaigns_name_the_file_the_key_and_what_was_expected(tmp_path, data, message):
    with pytest.raises(UserError) as err:
        load(tmp_path, data)
    text = str(err.value)
    assert message in text
    assert "\n" not in text


def test_missing_campaign_file(tmp_path):
    with pytest.raises(UserError, match="campaign file .*none.yml does not exist"):
        campaign.load(tmp_path / "none.yml")


def test_a_users_job_file_is_checked_by_fio(tmp_path):
    (tmp_path / "good.fio").write_text("[reader]\nrw=randread\nbs=4k\nsize=16m\n")
    (tmp_path / "notfio.fio").write_text("this is a shopping list\n")
    (tmp_path / "badopt.fio").write_text("[reader]\nrw=sideways\n")
    (tmp_path / "exec.fio").write_text("[reader]\nrw=read\nexec_prerun=touch /tmp/x\n")
    fio_workload = {"name": "mine", "type": "fio"}
    spec = load(tmp_path, with_("workloads.0", {**fio_workload, "jobfile": "good.fio"}))
    assert spec.workloads[0].jobfile == str(tmp_path / "good.fio")
    for name, says in [("notfio.fio", "is not a fio job file"), ("badopt.fio", "is not a valid fio job file"),
                       ("exec.fio", "runs commands on the hosts"), ("absent.fio", "cannot read")]:
        with pytest.raises(UserError, match=says):
            load(tmp_path, with_("workloads.0", {**fio_workload, "jobfile": name}))
