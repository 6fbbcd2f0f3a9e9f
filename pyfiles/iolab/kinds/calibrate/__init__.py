"""Workload kind `calibrate`: a model's real training step timed on the host's own accelerator (bench.calibrate).

workload.py (the campaign's entry, its host call), parser.py (calibration.json → the step's time), host.py (the
timed training step, torch on the host); its role is roles/bench_calibrate/.
"""
