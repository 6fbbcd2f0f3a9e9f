"""Workload kind `checkpoint`: MLPerf Storage's checkpointing (write and fsync, drop caches, read back).

workload.py (the campaign's entry, the models' sizes, its host calls), parser.py (checkpoint.json → write and read
figures), host.py (the ranks that write and read the shards on each host); its role is roles/bench_checkpoint/.
"""
