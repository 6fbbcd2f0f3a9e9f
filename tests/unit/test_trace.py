"""Traces: strace's recorded log converted to a trace, the trace's text checked line by line (iolab.shared.trace)."""

from __future__ import annotations

from pathlib import Path

import pytest

from iolab.shared import trace, trace_kvcache, trace_strace

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "strace_reader.log"
ROOT = "/tmp/iolab-fixture/root"  # where the recorded program read (tests/fixtures/strace_reader.log)


def _converted() -> tuple[dict, list]:
    return trace_strace.convert(FIXTURE.read_text(), ROOT)


def test_the_recorded_log_gives_each_process_its_files_offsets_and_bytes():
    """Two pool workers read f1..f3 (whole, pread at 50, lseek to 10 + read 7, readv 3+5), a thread reads f1 again,
    the parent writes out.bin (5000 B at 0, pwrite 100 B at 8000, fdatasync, fsync): unfinished calls joined."""
    header, records = _converted()
    names = [name for name, _ in header["files"]]
    assert names == ["sub/f1.bin", "sub/f2.bin", "sub/f3.bin", "sub/out.bin"]
    assert [size for _, size in header["files"]] == [10000, 20000, 30000, 8100]  # extents: the files are gone
    reads = [(names[f], off, n) for _, op, f, off, n, _, _ in records if op == "read"]
    for name, size in (("sub/f1.bin", 10000), ("sub/f2.bin", 20000), ("sub/f3.bin", 30000)):
        assert (name, 0, size) in reads and (name, 50, 100) in reads
        assert (name, 10, 7) in reads and (name, 17, 8) in reads  # lseek then read, then readv after it
    assert reads.count(("sub/f1.bin", 0, 10000)) == 2  # a worker and the thread
    writes = [(op, off, n) for _, op, f, off, n, _, _ in records if names[f] == "sub/out.bin"]
    assert writes == [("open", 0, 0), ("write", 0, 5000), ("write", 8000, 100), ("fdatasync", 0, 0)] + [
        ("fsync", 0, 0),
        ("close", 0, 0),
    ]
    assert len({pid for pid, *_ in records}) == 4
    starts = [r[5] for r in records]
    assert starts[0] == 0 and starts == sorted(starts)
    assert records[0][1] == "open" and records[0][6] == 173  # the first openat was unfinished: its whole time
    assert header["lines_left_out"] > 0  # the interpreter's own files are left out


def test_a_trace_written_reads_back_with_its_figures(tmp_path):
    header, records = _converted()
    path = trace.write(tmp_path, {**header, "tracer": "strace"}, records)
    loaded = trace.load(path)
    assert loaded.records == len(records) and path.name == f"{loaded.sha256[:16]}.trace"
    assert loaded.bytes == {"read": 2 * 10000 + 20000 + 30000 + 4 * (100 + 7 + 8), "write": 5100}
    assert loaded.dataset_bytes == 68100 and len(loaded.processes) == 4
    assert loaded.span_us == records[-1][5] + records[-1][6]
    assert list(trace.records(loaded)) == records


def _refused(tmp_path: Path, text: str) -> str:
    path = tmp_path / "bad.trace"
    path.write_text(text)
    with pytest.raises(trace.TraceError) as refused:
        trace.load(path)
    message = str(refused.value)
    assert "\n" not in message and str(path) in message
    return message


def test_bad_traces_are_refused_in_one_line(tmp_path):
    good = trace.render({"root": "/r", "files": [["a", 10]]}, [(1, "open", 0, 0, 0, 0, 1), (1, "read", 0, 0, 10, 5, 1)])
    lines = good.splitlines(keepends=True)
    assert "not an iolab trace" in _refused(tmp_path, "time,op\n1,read\n")
    assert "truncated (no end line)" in _refused(tmp_path, "".join(lines[:-1]))
    assert "truncated or changed" in _refused(tmp_path, "".join(lines[:2] + lines[3:]))
    backwards = trace.render(
        {"root": "/r", "files": [["a", 10]]}, [(1, "read", 0, 0, 1, 9, 1), (1, "read", 0, 0, 1, 5, 1)]
    )
    assert "timestamps go backwards (5 µs after 9 µs)" in _refused(tmp_path, backwards)
    for name in ("../etc/passwd", "/etc/passwd", "a/../../b"):
        escaped = trace.render({"root": "/r", "files": [[name, 1]]}, [])
        assert "outside the trace's root" in _refused(tmp_path, escaped)
    unknown = trace.render({"root": "/r", "files": [["a", 1]]}, [(1, "read", 3, 0, 1, 0, 1)])
    assert "file 3 is not in the header's 1 files" in _refused(tmp_path, unknown)
    negative = trace.render({"root": "/r", "files": [["a", 1]]}, [(1, "read", 0, -1, 1, 0, 1)])
    assert "line 2 is not PID, OP, FILE" in _refused(tmp_path, negative)
    mapped = trace.render({"root": "/r", "files": [["a", 1]]}, [(1, "mmap", 0, 0, 1, 0, 1)])
    assert "line 2 is not PID" in _refused(tmp_path, mapped)


def test_a_log_that_is_not_strace_s_is_refused():
    with pytest.raises(trace_strace.StraceError, match=f"no file I/O under {ROOT} in strace's log"):
        trace_strace.convert("hello\nworld\n", ROOT)


KV_LOG = """Timestamp,Operation,Object_Size_Bytes,Tier,Key,Phase
1700000000.100,Write,1048576,NVMe,user1/seq0/blk0,prefill
1700000000.050,Write,524288,CPU,user1/seq0/blk1,prefill
1700000000.300,Read,1048576,NVMe,user1/seq0/blk0,decode
1700000000.200,WRITE,2097152,nvme,user2/seq0/blk0,prefill
"""


def test_the_kvcache_io_trace_becomes_whole_object_ios_on_its_storage_tier(tmp_path):
    header, records = trace_kvcache.convert(KV_LOG)
    assert header["files"] == [["nvme/user1_seq0_blk0", 1 << 20], ["nvme/user2_seq0_blk0", 2 << 20]]
    moved = [(op, f, n, start) for _, op, f, _, n, start, _ in records if op in trace.MOVES]
    assert moved == [("write", 0, 1 << 20, 0), ("write", 1, 2 << 20, 100_000), ("read", 0, 1 << 20, 200_000)]
    loaded = trace.load(trace.write(tmp_path, header, records))  # rows sorted: a valid trace
    assert loaded.bytes == {"read": 1 << 20, "write": 3 << 20} and loaded.processes == (1,)
    with pytest.raises(trace_kvcache.KvcacheTraceError, match="no operation of tier 'ssd'"):
        trace_kvcache.convert(KV_LOG, "ssd")
    with pytest.raises(trace_kvcache.KvcacheTraceError, match="not MLCommons' KV-cache I/O trace"):
        trace_kvcache.convert("a,b\n1,2\n")


def test_a_directory_the_job_opened_is_not_a_file_of_the_trace():
    """The KV-cache clients open their rank's directory (listing it, fsyncing it after a create): strace names it
    as it names a file; staging it as one would collide with the files under it."""
    log = (
        '100 1700000000.000001 openat(AT_FDCWD</r>, "/r/d", O_RDONLY|O_DIRECTORY) = 3</r/d> <0.000010>\n'
        '100 1700000000.000020 openat(AT_FDCWD</r>, "/r/d/x", O_WRONLY|O_CREAT, 0644) = 4</r/d/x> <0.000010>\n'
        '100 1700000000.000030 write(4</r/d/x>, ""..., 10) = 10 <0.000010>\n'
        "100 1700000000.000040 fsync(3</r/d>) = 0 <0.000010>\n"
    )
    header, records = trace_strace.convert(log, "/r")
    assert header["files"] == [["d/x", 10]] and header["directories_left_out"] == 1
    assert [(op, f, start) for _, op, f, _, _, start, _ in records] == [("open", 0, 0), ("write", 0, 10)]
