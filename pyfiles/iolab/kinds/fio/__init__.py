"""Workload kind `fio`: fio itself, on a built-in profile, the campaign's options or a job file of the user's.

workload.py (the campaign's entry, its job's options, its host call), host.py (the prepare: the job sized to the
target, written and laid out, the caches dropped); fio's output is read by iolab.parsers.fio, which the replay kind and
the faults' figures read too, and the job files' policy both sides use is iolab.shared.fio_options and fio_jobfile;
its role is roles/bench_fio/.
"""
