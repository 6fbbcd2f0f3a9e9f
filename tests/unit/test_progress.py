"""A campaign's progress: the time-to-go arithmetic and the one line per run a CI log gets."""

from __future__ import annotations

import io

from rich.console import Console

from iolab.progress import Planned, Progress, duration


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def progress(planned: list[Planned], terminal: bool = False) -> tuple[Progress, Clock, io.StringIO]:
    out, clock = io.StringIO(), Clock()
    console = Console(file=out, force_terminal=terminal, width=100)
    return Progress(planned, console, clock), clock, out


PLAN = [Planned("a1", "seq", 10.0), Planned("b1", "load", 4.0), Planned("a2", "seq", 10.0), Planned("b2", "load", 4.0)]


def run(p: Progress, clock: Clock, planned: Planned, seconds: float, headline: str = "read_bw 1 GiB/s") -> None:
    p.start(planned)
    clock.now += seconds
    p.finish(f"run {planned.run_id}", headline)


def test_before_the_first_run_the_time_to_go_is_the_estimates():
    p, clock, _ = progress(PLAN)
    assert p.eta() == 28.0
    assert p.status() == "0 done, 4 left, about 28 s to go (estimated)"
    p.start(PLAN[0])
    clock.now += 3
    assert p.eta() == 7 + 4 + 10 + 4  # the current run has 7 s of its estimate left


def test_runs_of_a_workload_timed_already_are_expected_to_take_their_mean():
    p, clock, _ = progress(PLAN)
    run(p, clock, PLAN[0], 20.0)  # seq took twice its estimate
    # a2: seq's mean (20 s); b1 and b2: load not timed yet, its estimate × 20/10.
    assert p.expected(PLAN[2]) == 20.0 and p.expected(PLAN[1]) == 8.0
    assert p.eta() == 20 + 8 + 8
    run(p, clock, PLAN[1], 5.0)
    assert p.expected(PLAN[3]) == 5.0 and p.eta() == 20 + 5
    run(p, clock, PLAN[2], 30.0)
    assert p.expected(PLAN[2]) == 25.0 and p.eta() == 5
    p.start(PLAN[3])
    clock.now += 9  # past its expected time: nothing left, not negative
    assert p.eta() == 0
    assert p.status() == "3 done, 1 left, about 0 s to go"


def test_an_extra_repetition_joins_the_plan_when_it_starts():
    p, clock, _ = progress(PLAN[:1])
    run(p, clock, PLAN[0], 12.0)
    assert p.status() == "1 done, none left"
    extra = Planned("a3", "seq", 10.0)
    p.start(extra)
    assert p.eta() == 12.0 and p.status() == "1 done, 1 left, about 12 s to go"


def test_a_run_left_without_hosts_is_no_longer_counted_as_left():
    p, clock, _ = progress(PLAN)
    run(p, clock, PLAN[0], 10.0)
    p.drop("b1")
    assert p.status() == "1 done, 2 left, about 14 s to go"


def test_without_a_terminal_each_run_is_one_line_with_its_time_and_what_is_left():
    p, clock, out = progress(PLAN)
    for planned, seconds in zip(PLAN, (11.0, 5.0, 9.0, 4.0), strict=False):
        run(p, clock, planned, seconds, headline="samples_per_s 1.2k samples/s " + "x" * 80)
    lines = out.getvalue().splitlines()
    assert len(lines) == len(PLAN)  # never wrapped, never a table or a control sequence
    assert "\x1b" not in out.getvalue()
    assert lines[0].startswith("run a1: samples_per_s 1.2k samples/s") and "(11 s; 1 done, 3 left, about" in lines[0]
    assert lines[2].endswith("(9 s; 3 done, 1 left, about 5 s to go)")
    assert lines[3].endswith("(4 s; 4 done, none left)")


def test_durations_read_as_a_person_says_them():
    assert [duration(s) for s in (0, 44.6, 60, 160, 3725)] == ["0 s", "45 s", "1 min 00 s", "2 min 40 s", "1 h 02 min"]


def test_before_the_first_run_a_campaign_s_time_to_go_is_the_dry_run_estimate():
    from pathlib import Path

    from iolab.campaign import model as campaign
    from iolab.run import plan

    spec = campaign.load(Path(__file__).resolve().parents[2] / "campaigns" / "quick.yml")
    runs = campaign.expand(spec)
    p, _, _ = progress(plan.planned(runs))
    assert p.eta() == plan.estimate(runs)[0] > 0


def test_a_search_is_expected_to_take_its_probes_not_one_run():
    """campaigns/kvcache.yml's users search (up to its ceiling of users, its duration a probe): doubling from 1 user to
    its ceiling, then the two points by the boundary probed twice more each, each probe its duration and the ranks'
    start and end. The estimate said 2.5 s a search ("about 0 s to go" for minutes)."""
    import math
    from pathlib import Path

    from iolab.campaign import model as campaign
    from iolab.run import plan

    spec = campaign.load(Path(__file__).resolve().parents[2] / "campaigns" / "kvcache.yml")
    runs = campaign.expand(spec)
    searches = [r for r in runs if plan.searches(r)]
    assert searches and all(r.workload.search == "users" for r in searches)
    p, clock, _ = progress(plan.planned(runs))
    expected = {}
    for r in searches:
        probes = math.ceil(math.log2(r.workload.settled("users"))) + 1 + 2 * 2
        expected[r.run_id] = probes * r.workload.settled("duration")
        assert p.planned[r.run_id].estimate >= expected[r.run_id] >= 60.0
    p.start(p.planned[searches[0].run_id])
    clock.now += 30.0  # half a minute into the first search: its other probes and the other searches to go
    assert p.eta() >= sum(expected.values()) - 30.0 and "min" in p.status()


def test_an_accelerator_search_is_expected_to_take_its_probes_at_least_at_the_accelerators_pace():
    """campaigns/quick.yml's search up to 16 H100s: 9 expected probes, each rank at least 500 measured steps of the
    emulated step time (17.9 ms for resnet50 at batch 32): 80 s a backend at the least, not 2.5 s."""
    from pathlib import Path

    from iolab.campaign import model as campaign
    from iolab.run import plan

    spec = campaign.load(Path(__file__).resolve().parents[2] / "campaigns" / "quick.yml")
    runs = campaign.expand(spec)
    p, _, _ = progress(plan.planned(runs))
    for r in (r for r in runs if plan.searches(r)):
        step = r.workload.accelerator.compute_time(r.workload.batch_size)
        assert p.planned[r.run_id].estimate >= 9 * 500 * step >= 60.0


def test_on_a_terminal_the_live_table_of_each_playbook_shows_the_campaign_s_progress_under_it():
    from iolab.drive import runner

    p, clock, _ = progress(PLAN, terminal=True)
    run(p, clock, PLAN[0], 10.0)
    live = runner._Progress("run 2/4: load on tmpfs", ["gpu01"], p.console, p.status)
    out = io.StringIO()
    Console(file=out, force_terminal=True, width=120).print(live.table())
    last = out.getvalue().splitlines()[-1]
    assert "1 done, 3 left, about 18 s to go" in last and "gpu01" in out.getvalue()
