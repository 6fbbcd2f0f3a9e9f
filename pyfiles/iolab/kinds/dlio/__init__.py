"""DLIO as a reference leg: DLIO and MLPerf Storage workload files as iolab workloads, run by DLIO itself.

workload.py (a workload file read into a pytorch entry with `engine: dlio`, its host call), parser.py (DLIO's
summary → the loaders' metrics), host.py (DLIO under mpirun on each host); its role is roles/bench_dlio/.
"""
