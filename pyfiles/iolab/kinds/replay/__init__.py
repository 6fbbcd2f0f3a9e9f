"""Workload kind `replay`: a captured job's file I/O (a trace) played on each backend by fio.

workload.py (the campaign's entry, its host call), parser.py (fio's figures and the replay's time); the host program
is the traces' own (iolab.host.trace: stage, replay; capture serves `./lab trace.capture` too) and the report section
report/replay.py; its role is roles/bench_replay/.
"""
