"""Workload kinds, one folder each: a kind's schema, host call, parser and host program together; their registry.

    kinds/<kind>/workload.py   the campaign's entry (a Workload: schema, defaults, estimate) and its host call
    kinds/<kind>/parser.py     the tool's files on one host → measurements (METRICS, TOOLS, parse)
    kinds/<kind>/host.py       the program the host runs (stdlib and iolab.host only: it ships in the release);
                               a further one host_<part>.py
    kinds/registry.py          the union of every kind, each tool's parser
    kinds/hostcall.py          each kind's host call, by its bench role

Each file of a kind's folder stands on its layer (tests/unit/test_structure.py: workload.py on the workloads' floor,
parser.py on the parsers', host.py on the host side), so the folder keeps a kind together without the host importing
the controller, and this package's face and each folder's import nothing (the host imports them on its way to
host.py). The registry and the host calls stand above every kind. A kind's role is roles/bench_<tool>/;
docs/DESIGN.md ("A workload kind") lists what a new kind provides. What several kinds share stays below them:
iolab.workloads (base, accelerator, mlperf), iolab.parsers (fio's, telemetry's), iolab.host (the loaders' parts, the
traces' program).
"""
