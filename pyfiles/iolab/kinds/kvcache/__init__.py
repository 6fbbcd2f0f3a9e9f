"""Workload kind `kvcache`: LLM inference's KV-cache offload to the storage, MLPerf Storage v3.0's workload.

workload.py (the campaign's entry, its host calls: iolab's clients, or MLCommons' kv-cache.py as the reference leg),
parser.py (the clients' summary → bandwidths, token rates, latency percentiles), host.py (iolab's clients, on
iolab.host.kvcache_sim and kvcache_tiers), host_reference.py (kv-cache.py under mpirun: installed, launched,
summarized alike); the rules are iolab.workloads.kvcache_rules, the search iolab.run.kvcache_search, the report
sections iolab.report.kvcache and mlperf_kv; its roles are roles/bench_kvcache/ and roles/bench_mlperf_kvcache/.
"""
