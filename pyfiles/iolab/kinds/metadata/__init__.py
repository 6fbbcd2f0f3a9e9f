"""Workload kind `metadata`: readdir, stat and open/close rates over a data set's tree (the small-file bottleneck).

workload.py (the campaign's entry, its host call), parser.py (metadata.json → ops/s), host.py (the tree walk the host
runs); its role is roles/bench_metadata/.
"""
