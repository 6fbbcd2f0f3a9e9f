from pathlib import Path

import pytest
import yaml

from iolab.campaign import model as campaign
from iolab.errors import UserError

ROOT = Path(__file__).resolve().parents[2]
GOOD = {
    "name": "t",
    "repetitions": 2,
    "backends": [
        {"name": "mem", "type": "tmpfs", "size": "256MiB"},
        {"name": "disk", "type": "local", "path": "/var/tmp"},
    ],
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
    # fio baselines, each repeated; then one search for the most H100s fed, on each backend
    baselines = [w for w in spec.workloads if w.tool == "fio"]
    searches = [w for w in spec.workloads if getattr(w, "search", None) == "accelerators"]
    assert [w.accelerator.type for w in searches] == ["h100"] and len(baselines) + 1 == len(spec.workloads)
    assert len(runs) == len(spec.backends) * (len(baselines) * spec.repetitions + 1)
    assert len({r.run_id for r in runs}) == len(runs)


def test_run_ids_are_stable_and_follow_the_configuration(tmp_path):
    first = [r.run_id for r in campaign.expand(load(tmp_path, GOOD))]
    again = [r.run_id for r in campaign.expand(load(tmp_path, GOOD))]
    assert first == again
    changed = [r.run_id for r in campaign.expand(load(tmp_path, with_("workloads.0.runtime", "3s")))]
    assert set(first).isdisjoint(changed)


def test_list_parameters_sweep_as_a_cartesian_product(tmp_path):
    spec = load(
        tmp_path,
        with_(
            "workloads.0",
            {"name": "qd", "type": "fio", "profile": "rand-read-16k", "iodepth": [1, 8], "numjobs": [1, 2]},
        ),
    )
    runs = campaign.expand(spec)
    assert len(runs) == 2 * 4 * 2  # backends × sweep points × repetitions
    assert {(r.params["iodepth"], r.params["numjobs"]) for r in runs} == {(1, 1), (1, 2), (8, 1), (8, 2)}


def test_sizes_and_durations_take_units(tmp_path):
    spec = load(tmp_path, GOOD)
    assert spec.backends[0].size == 256 << 20
    assert spec.workloads[0].runtime == 2.0
    assert spec.backends[0].target == "/mnt/iolab/mem"


@pytest.mark.parametrize(
    "data, message",
    [
        (
            with_("backends.0.sise", "1G"),
            "c.yml: backends[0].sise: unknown key (expected one of: name, type, size, mountpoint)",
        ),
        (with_("colour", "blue"), "c.yml: colour: unknown key (expected one of: name, description, repetitions"),
        (
            with_("backends.0.type", "nfs9"),
            "c.yml: backends[0].type: unknown backend type 'nfs9' "
            "(expected one of: tmpfs, local, rbd_snapshot, cephfs, nfs, sshfs, mount, rbd, s3)",
        ),
        (with_("workloads.0.type", "mystery"), "c.yml: workloads[0].type: unknown workload type 'mystery'"),
        (
            with_("workloads.0.profile", "fast"),
            "c.yml: workloads[0]: unknown fio profile 'fast' (expected one of: seq-read-1m",
        ),
        (
            with_("backends.0.size", "lots"),
            "c.yml: backends[0].size: expected a size such as 2GiB or 500MB, got 'lots'",
        ),
        (with_("backends.0.size", "0GiB"), "c.yml: backends[0].size: a size must be positive, got '0GiB'"),
        (with_("backends.0.size", "2XB"), "c.yml: backends[0].size: unknown size unit 'xb'"),
        (with_("workloads.0.runtime", "soon"), "c.yml: workloads[0].runtime: expected a duration such as 10s or 2m"),
        (with_("workloads.0.runtime", 0), "c.yml: workloads[0].runtime: a duration must be positive"),
        (with_("repetitions", 0), "c.yml: repetitions: Input should be greater than or equal to 1"),
        (with_("backends.1.path", "var/tmp"), "c.yml: backends[1].path: 'var/tmp' must be an absolute path"),
        (with_("name", "../../etc"), "c.yml: name: '../../etc' is not a valid name"),
        (with_("name", "x; rm -rf /"), "c.yml: name: 'x; rm -rf /' is not a valid name"),
        (with_("backends.1.name", "mem"), "backend names must be unique; repeated: mem"),
        (  # two workloads without a name are missing one each, not named alike
            with_(
                "workloads", [{"type": "fio", "profile": "seq-read-1m"}, {"type": "fio", "profile": "rand-read-16k"}]
            ),
            "c.yml: workloads[0].name: missing required key",
        ),
        (with_("workloads.0.jobfile", "x.fio"), "give either profile"),
        (with_("backends.1.path", "/x/{{ lookup('pipe', 'id') }}"), "template markers"),
        ("name: [unclosed", "c.yml: not valid YAML at line 1"),
        ("- a\n- b\n", "c.yml: a campaign file must be a YAML mapping"),
        ("just words", "c.yml: a campaign file must be a YAML mapping"),
    ],
)
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
    for name, says in [
        ("notfio.fio", "is not a fio job file"),
        ("badopt.fio", "is not a valid fio job file"),
        ("exec.fio", "runs commands on the hosts"),
        ("absent.fio", "cannot read"),
    ]:
        with pytest.raises(UserError, match=says):
            load(tmp_path, with_("workloads.0", {**fio_workload, "jobfile": name}))


# --- issue 6: paired sweeps, order, cache policy, warm-up, timeouts, repetition cap ---------------


def test_zip_pairs_values_and_the_rest_still_sweep_as_a_product(tmp_path):
    spec = load(
        tmp_path,
        with_(
            "workloads.0",
            {
                "name": "qd",
                "type": "fio",
                "profile": "rand-read-16k",
                "numjobs": [1, 2],
                "zip": {"iodepth": [1, 32], "ioengine": ["psync", "libaio"]},
            },
        ),
    )
    points = {(r.params["numjobs"], r.params["iodepth"], r.params["ioengine"]) for r in campaign.expand(spec)}
    assert points == {(1, 1, "psync"), (1, 32, "libaio"), (2, 1, "psync"), (2, 32, "libaio")}


@pytest.mark.parametrize(
    "zipped, message",
    [
        (
            {"iodepth": [1, 32], "numjobs": [1]},
            "workloads[0].zip: lists must have equal lengths, got iodepth: 2, numjobs: 1",
        ),
        ({"runtime": ["1s", "2s"]}, "workloads[0].zip: runtime also given outside zip"),
        ([1, 2], "workloads[0].zip: takes a mapping of keys to lists"),
    ],
)
def test_zip_mistakes_are_named(tmp_path, zipped, message):
    with pytest.raises(UserError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load(tmp_path, with_("workloads.0.zip", zipped))


def test_random_order_is_seeded_and_keeps_every_run_and_its_id(tmp_path):
    data = with_("workloads.0.numjobs", [1, 2, 3])
    written = campaign.expand(load(tmp_path, data))
    shuffled = campaign.expand(load(tmp_path, {**data, "order": "random", "order_seed": 3}))
    again = campaign.expand(load(tmp_path, {**data, "order": "random", "order_seed": 3}))
    other = campaign.expand(load(tmp_path, {**data, "order": "random", "order_seed": 4}))
    ids = [r.run_id for r in written]
    assert sorted(ids) == sorted(r.run_id for r in shuffled)  # the same runs, the same ids
    assert [r.run_id for r in shuffled] == [r.run_id for r in again]  # the same order every time
    assert [r.run_id for r in shuffled] not in (ids, [r.run_id for r in other])
    # Shuffled within each backend: one mount per backend still.
    assert [r.backend.name for r in shuffled] == [r.backend.name for r in written]


def test_cache_warm_runs_each_repetition_cold_then_warm(tmp_path):
    runs = campaign.expand(load(tmp_path, {**GOOD, "order": "random", "cache": "warm"}))
    assert len(runs) == 2 * 2 * 2  # backends × repetitions × (cold, warm)
    pairs = list(zip(runs[::2], runs[1::2], strict=False))
    for cold, warm in pairs:  # adjacent, cold first, even in random order
        assert (cold.params["cache"], warm.params["cache"]) == ("cold", "warm")
        assert (cold.drop_caches, warm.drop_caches) == (True, False)
        assert cold.repetition == warm.repetition and cold.run_id != warm.run_id
    assert len({r.run_id for r in runs}) == len(runs)


def test_campaign_level_policies_are_defaults_a_workload_overrides(tmp_path):
    data = {
        **GOOD,
        "cache": "keep",
        "timeout": "90s",
        "workloads": [GOOD["workloads"][0], {**GOOD["workloads"][0], "name": "own", "cache": "drop", "timeout": "30s"}],
    }
    runs = {r.workload.name: r for r in campaign.expand(load(tmp_path, data))}
    assert runs["seq"].params["cache"] == "kept" and not runs["seq"].drop_caches
    assert runs["own"].params["cache"] == "cold" and runs["own"].drop_caches
    assert runs["seq"].workload.role_vars("/t")["bench_fio_timeout"] == 90
    assert runs["own"].workload.role_vars("/t")["bench_fio_timeout"] == 30
    # Without a timeout, fio gets its runtime, ramp and two minutes.
    assert campaign.expand(load(tmp_path, GOOD))[0].workload.role_vars("/t")["bench_fio_timeout"] == 2 + 2 + 120


def test_warm_command_is_an_argv_that_needs_cache_warm(tmp_path):
    spec = load(tmp_path, {**GOOD, "cache": "warm", "warm_command": ["vendor-cli", "prefetch", "--path", "."]})
    assert spec.workloads[0].warm_command == ["vendor-cli", "prefetch", "--path", "."]
    assert len(campaign.expand(spec)) == 2 * 2 * 2  # an argv list is one value, not a sweep
    with pytest.raises(UserError, match=r"workloads\[0\]: warm_command is the warm-up of cache: warm"):
        load(tmp_path, with_("workloads.0.warm_command", ["true"]))


def test_max_repetitions_below_repetitions_is_refused(tmp_path):
    with pytest.raises(UserError, match=r"max_repetitions \(1\) is below repetitions \(2\)"):
        load(tmp_path, {**GOOD, "max_repetitions": 1})


def test_a_new_optional_field_left_at_its_default_keeps_the_run_ids(tmp_path):
    plain = [r.run_id for r in campaign.expand(load(tmp_path, GOOD))]
    spelled = [r.run_id for r in campaign.expand(load(tmp_path, {**GOOD, "cache": "drop", "warmup": False}))]
    assert plain == spelled
    warm = [r.run_id for r in campaign.expand(load(tmp_path, {**GOOD, "warmup": True}))]
    assert set(plain).isdisjoint(warm)


@pytest.mark.parametrize("path", sorted((ROOT / "campaigns").glob("*.yml")), ids=lambda p: p.name)
def test_every_shipped_campaign_loads_and_expands(path):
    spec = campaign.load(path)
    runs = campaign.expand(spec)
    assert runs and len({r.run_id for r in runs}) == len(runs)


def test_dry_run_shows_each_sweep_point_its_host_commands_and_an_estimate(tmp_path):
    from support import Cli

    data = {
        **GOOD,
        "backends": GOOD["backends"][:1],
        "cache": "warm",
        "workloads": [
            {
                "name": "qd",
                "type": "fio",
                "profile": "rand-read-16k",
                "runtime": "10s",
                "ramp": "2s",
                "zip": {"iodepth": [1, 32], "ioengine": ["psync", "libaio"]},
            }
        ],
    }
    path = tmp_path / "sweep.yml"
    path.write_text(yaml.safe_dump(data))
    out = Cli(tmp_path / "results")("bench.all", "--campaign", str(path), "--dry-run").stdout
    # 2 points × 2 repetitions × (cold, warm) = 8 runs of 12 s and ≈4 s each.
    assert "campaign t: 8 runs on localhost, in the order written (about 2 min;" in out
    for point in ("iodepth=1 ioengine=psync", "iodepth=32 ioengine=libaio"):
        assert sum(point in line and "cache=cold" in line for line in out.splitlines()) == 2
        assert sum(point in line and "cache=warm" in line for line in out.splitlines()) == 2
    assert "each repetition twice: cold (caches dropped), then warm" in out
    assert "rw=randread" in out and "bs=16k" in out and "runtime=10" in out
    assert not (tmp_path / "results").exists()  # nothing ran, nothing stored


def test_profilers_are_one_list_not_a_sweep_and_py_spy_is_for_python_tools(tmp_path):
    spec = load(tmp_path, with_("workloads.0.profilers", ["perf"]))
    assert len(campaign.expand(spec)) == 2 * 2 and spec.setup_vars()["iolab_host_profilers"] == ["perf"]
    assert campaign.expand(spec)[0].params["profilers"] == ["perf"]
    assert "profilers" not in campaign.expand(load(tmp_path, GOOD))[0].params
    with pytest.raises(UserError, match=r"workloads\[0\]: py-spy samples Python programs; fio is not one"):
        load(tmp_path, with_("workloads.0.profilers", ["perf", "py-spy"]))
    with pytest.raises(UserError, match=r"workloads\[0\]\.profilers\[0\]"):
        load(tmp_path, with_("workloads.0.profilers", ["gprof"]))
