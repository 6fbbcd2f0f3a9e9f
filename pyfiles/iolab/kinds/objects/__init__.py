"""Workload kind `objects`: S3 object PUT and GET rates and latencies against the backend's bucket.

workload.py (the campaign's entry, its host call), parser.py (objects.json → the figures, in fio's names), host.py
(the PUTs and GETs each host makes with boto3); its role is roles/bench_objects/.
"""
