"""The results database: schema, index, publish, query, check, and storing a run into it.

What a statement of `./lab results.query` may take, here rather than in iolab.results.query so that the task's
flags say them without importing SQLAlchemy (≈ 0.2 s of every command's start: the task modules load together).
"""

QUERY_ROWS = 10_000  # rows a statement may give (--max-rows: another cap; 0: none)
QUERY_SECONDS = 60.0  # seconds a statement may run (--seconds: another limit; 0: none)
