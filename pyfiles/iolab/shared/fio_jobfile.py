"""Users' fio job files read as fio reads them, and the check that keeps a job inside its target.

fio runs a job file with its working directory on the backend's target (each host's
work directory there), so relative file names land on the target. The check refuses
what could reach past it: commands and loadable code, absolute paths, '..', variable
expansion, network engines, and devices the campaign does not name in allow_devices.
The hosts get the flattened text (includes inlined) of the file that was checked,
and check it again before fio reads it.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

MAX_INCLUDE_DEPTH = 8
MAX_LINE = 8191  # fio reads a job file in pieces of 8191 characters: the rest of a line is a line of its own

# fio's option aliases (`fio --cmdhelp=OPTION` names each option's alias), mapped to the option.
ALIASES = {
    "readwrite": "rw",
    "blocksize": "bs",
    "blockalign": "ba",
    "blocksize_range": "bsrange",
    "blocksize_unaligned": "bs_unaligned",
    "iodepth_batch_submit": "iodepth_batch",
    "iodepth_batch_complete": "iodepth_batch_complete_min",
    "io_limit": "io_size",
    "fill_fs": "fill_device",
    "fileoffset": "offset",
    "nr_files": "nrfiles",
    "timeout": "runtime",
    "iomem": "mem",
    "ratemin": "rate_min",
    "ratecycle": "rate_cycle",
    "wait_for_previous": "stonewall",
    "disable_bw": "disable_bw_measurement",
    "ss": "steadystate",
    "ss_dur": "steadystate_duration",
    "ss_ramp": "steadystate_ramp_time",
}

# iolab's one list of the fio options it refuses, wherever fio options come from (a user's job file:
# check(); a workload's options over a built-in profile: iolab.shared.fio_options.profile_options), and
# why: they run commands or change the host outside the target. The trigger options are fio command-line
# options (fio refuses them in a job file too); they are named here for a clear message.
REFUSED = {
    "exec_prerun": "runs commands on the hosts",
    "exec_postrun": "runs commands on the hosts",
    "trigger": "runs commands on the hosts",
    "trigger-cmd": "runs commands on the hosts",
    "trigger-file": "runs commands on the hosts",
    "trigger-timeout": "runs commands on the hosts",
    "trigger-remote": "runs commands on the hosts",
    "ioscheduler": "changes the I/O scheduler of the host's disk",
    "cgroup": "creates control groups on the host, outside the target",
    "profile": "runs one of fio's built-in profiles, which take their own devices and directories",
}

# I/O engines that work on files (and, with allow_devices, on devices): nothing else is loaded.
ENGINES = (
    "sync",
    "psync",
    "vsync",
    "pvsync",
    "pvsync2",
    "libaio",
    "io_uring",
    "posixaio",
    "mmap",
    "splice",
    "null",
    "falloc",
    "ftruncate",
    "filecreate",
    "filestat",
    "filedelete",
    "dircreate",
    "dirstat",
    "dirdelete",
    "sg",
)
_WRITING_ENGINES = {"falloc", "ftruncate", "filecreate", "filedelete", "dircreate", "dirdelete"}

# Options holding file names, ':'-separated lists of them. Only FILE_OPTIONS may name an allowed device.
FILE_OPTIONS = ("filename", "replay_redirect")
PATH_OPTIONS = FILE_OPTIONS + (
    "directory",
    "opendir",
    "filename_format",
    "read_iolog",
    "write_iolog",
    "merge_blktrace_file",
    "write_bw_log",
    "write_lat_log",
    "write_iops_log",
    "write_hist_log",
)
# filename_format's own keywords (fio replaces them; any other '$' would be expanded by fio).
_FORMAT_KEYWORDS = re.compile(r"\$(jobname|jobnum|filenum|clientuid)")
# Patterns that may name a file in single quotes, read by fio on the host.
_PATTERN_OPTIONS = ("buffer_pattern", "verify_pattern")
_READS = {"read", "randread"}
_KEY = re.compile(r"[a-z][a-z0-9_-]*")
_CONFINED = "fio may only use relative paths inside the backend's target (it runs in the host's work directory there)"


@dataclass(frozen=True)
class Option:
    """One `key=value` (value None for a bare flag), where it was written."""

    key: str
    value: str | None
    file: str
    section: str

    @property
    def name(self) -> str:
        """The option's own name (an alias resolved)."""
        return ALIASES.get(self.key, self.key)

    def __str__(self) -> str:
        return self.key if self.value is None else f"{self.key}={self.value}"

    def refuse(self, problem: str) -> ValueError:
        return ValueError(f"{self.file}: [{self.section}] {self}: {problem}")


@dataclass(frozen=True)
class Section:
    name: str
    options: tuple[Option, ...]


@dataclass(frozen=True)
class JobFile:
    """A job file's sections, in order, with every include inlined."""

    path: str
    sections: tuple[Section, ...]

    @property
    def text(self) -> str:
        """The job file fio reads on the hosts: what was checked, no includes, no comments."""
        lines = []
        for section in self.sections:
            lines += [f"[{section.name}]"] + [str(option) for option in section.options]
        return "\n".join(lines) + "\n"

    def options(self) -> list[Option]:
        return [option for section in self.sections for option in section.options]


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text().split("\n")  # fio splits lines at newlines only
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror if isinstance(exc, OSError) else exc}") from None


def _clean(line: str) -> str:
    """The line as fio reads it: everything from the first ';' or '#' on is a comment."""
    return re.split(r"[;#]", line, maxsplit=1)[0].strip()


def _parse(lines: list[str], file: str, stack: tuple[Path, ...], sections: list[tuple[str, list[Option]]]) -> None:
    """Add the sections and options of `lines` (read from `file`, included through `stack`) to `sections`."""
    if len(stack) <= 1 and not any(_clean(line).startswith("[") for line in lines):
        raise ValueError(f"{file} is not a fio job file (no [job] section)")
    for number, raw in enumerate(lines, 1):
        if len(raw) > MAX_LINE or any(c < " " and c not in "\t\r" for c in raw):
            raise ValueError(
                f"{file}:{number}: a line may have at most {MAX_LINE} characters and no control "
                "characters (fio reads the rest of a longer line as a line of its own)"
            )
        line = _clean(raw)
        if not line:
            continue
        where = f"{file}:{number}: {line}"
        if line.startswith("["):
            if len(stack) > 1:
                raise ValueError(
                    f"{where}: an included file may not start a section (fio refuses it); "
                    "keep the sections in the main job file"
                )
            if not line.endswith("]") or not 3 <= len(line) <= 257:
                raise ValueError(f"{where}: a section header is [name], with a name of 1 to 255 characters")
            sections.append((line[1:-1], []))
            continue
        if not sections:
            raise ValueError(f"{where}: comes before any [section] (fio refuses it); put it under [global]")
        section, options = sections[-1]
        if line.startswith("include"):
            path = _include(line[len("include") :], where, stack)
            _parse(_lines(path), str(path), stack + (path,), sections)
            continue
        key, equals, value = line.partition("=")
        key = key.strip()
        if not _KEY.fullmatch(key):  # the line is not echoed: an included file may be anything, secrets too
            raise ValueError(f"{file}:{number}: not a fio option (key=value or a bare flag)")
        options.append(Option(key, value.strip() if equals else None, file, section))


def _include(name: str, where: str, stack: tuple[Path, ...]) -> Path:
    """The file an `include FILE` line names: FILE relative to the including file's directory."""
    if not name[:1].isspace() or not name.strip():
        raise ValueError(f"{where}: write include FILE")
    if not stack:
        raise ValueError(f"{where}: a checked job file has its includes inlined; this one was changed")
    path = (stack[-1].parent / name.strip()).resolve()
    if path in stack:
        raise ValueError(
            f"{where}: includes itself (" + " -> ".join(p.name for p in stack + (path,)) + "); remove the cycle"
        )
    if len(stack) > MAX_INCLUDE_DEPTH:
        raise ValueError(f"{where}: includes nest deeper than {MAX_INCLUDE_DEPTH} files")
    return path


def load(path: Path) -> JobFile:
    """Parse the job file at `path` as fio would, its includes inlined; a ValueError names file and line."""
    sections: list[tuple[str, list[Option]]] = []
    _parse(_lines(Path(path)), str(path), (Path(path).resolve(),), sections)
    return JobFile(str(path), tuple(Section(name, tuple(options)) for name, options in sections))


def parse_text(text: str, name: str) -> JobFile:
    """A flattened job file (JobFile.text, which has no includes); `name` names it in errors."""
    sections: list[tuple[str, list[Option]]] = []
    _parse(text.split("\n"), name, (), sections)
    return JobFile(name, tuple(Section(section, tuple(options)) for section, options in sections))


# --- the check ------------------------------------------------------------------------------------


def _names(option: Option) -> list[str]:
    """The file names an option holds (several, ':'-separated, for most path options)."""
    value = option.value or ""
    if option.name == "mem":
        return value.split(":", 1)[1:]  # mmaphuge:/hugetlbfs/file
    if option.name in _PATTERN_OPTIONS:
        return re.findall(r"'([^']*)'", value)  # 'file' is read, "string" is data
    if option.name == "filename" and value == "-":
        raise option.refuse("fio reads '-' as its standard input or output; name a file on the target")
    return value.split(":") if value else []


def _check_name(option: Option, name: str, devices: tuple[str, ...]) -> None:
    if option.name in FILE_OPTIONS and name in devices:
        return
    if "\\" in name:
        raise option.refuse("fio reads '\\' as an escape in file names; name the file without it")
    if name.startswith("/"):
        where = (
            ", or list the device in allow_devices of every backend the job runs on (scratch backends)"
            if name.startswith("/dev/") and option.name in FILE_OPTIONS
            else ""
        )
        raise option.refuse(f"{_CONFINED}; use a relative name{where}")
    if ".." in Path(name).parts:
        raise option.refuse(f"{_CONFINED}; remove '..'")
    if "$" in (_FORMAT_KEYWORDS.sub("", name) if option.name == "filename_format" else name):
        raise option.refuse(f"{_CONFINED}; fio would expand '$' on the host: write the name literally")


def _check_engine(option: Option) -> None:
    engine = option.value or ""
    if engine in ENGINES:
        return
    if engine == "exec":
        why = "runs a program on the hosts"
    elif engine.startswith("external") or "/" in engine:
        why = "loads code into fio on the hosts"
    else:
        why = "is not a file or block engine (network and other engines reach past the target)"
    raise option.refuse(f"ioengine {engine or '(empty)'} {why}; use one of: {', '.join(ENGINES)}")


def check(job: JobFile, allow_devices: tuple[str, ...] | list[str] = ()) -> None:
    """Raise ValueError (one line: file, section, option, why) unless the job stays on its target.

    `allow_devices`: devices the job may name by absolute path (a scratch backend's allow_devices).
    """
    devices = tuple(allow_devices)
    for section in job.sections:
        if "/" in section.name or section.name in (".", "..") or "{{" in section.name or "{%" in section.name:
            raise ValueError(
                f"{job.path}: [{section.name}]: fio names a job's files after its section; "
                "a section name may not contain '/' (nor {{ or {%, which Ansible would evaluate)"
            )
        for option in section.options:
            if any(mark in str(option) for mark in ("{{", "{%")):
                raise option.refuse("Ansible would evaluate {{ or {% on the controller; write the value literally")
            if "${" in str(option):
                raise option.refuse("fio would replace ${...} with the host's environment; write the value literally")
            if option.name in REFUSED:
                raise option.refuse(f"{option.name} {REFUSED[option.name]}; iolab refuses it in job files")
            if option.name == "ioengine":
                _check_engine(option)
            elif option.name == "name" and "/" in (option.value or ""):
                raise option.refuse("fio names a job's files after its name; a name may not contain '/'")
            elif option.name in PATH_OPTIONS + _PATTERN_OPTIONS or option.name == "mem":
                for name in _names(option):
                    _check_name(option, name, devices)
    sg = next((o for o in job.options() if o.name == "ioengine" and o.value == "sg"), None)
    names = [name for o in job.options() if o.name == "filename" for name in _names(o)]
    if sg and (not names or any(name not in devices for name in names)):
        raise sg.refuse("the sg engine sends SCSI commands to a device: name only devices of allow_devices in filename")


def writes(job: JobFile) -> str:
    """The first option that makes the job write, as `[section] option` ('' when it only reads)."""
    for option in job.options():
        value = (option.value or "").split(":")[0]
        if (
            (option.name == "rw" and value not in _READS)
            or (option.name == "ioengine" and value in _WRITING_ENGINES)
            or (option.name in ("unlink", "unlink_each_loop", "fill_device") and value not in ("0", "false"))
        ):
            return f"[{option.section}] {option}"
    return ""


def devices(job: JobFile) -> list[str]:
    """The absolute names the job's file options hold (after check(): the allowed devices it uses)."""
    return sorted(
        {
            name
            for option in job.options()
            if option.name in FILE_OPTIONS
            for name in _names(option)
            if name.startswith("/")
        }
    )


def check_on_host(job: JobFile, workdir: Path, allow_devices: tuple[str, ...] | list[str] = ()) -> JobFile:
    """check(), then what only the host can see: a name that leads off the work directory (through a
    symbolic link), a device node there, and an allowed device that is no device on this host."""
    check(job, allow_devices)
    root = workdir.resolve()
    directories = [name for option in job.options() if option.name == "directory" for name in _names(option)]
    for option in job.options():
        if option.name not in PATH_OPTIONS:
            continue
        for name in _names(option):
            if name.startswith("/"):  # an allowed device (check() refused any other)
                mode = os.stat(name).st_mode if os.path.exists(name) else 0
                if not (stat.S_ISBLK(mode) or stat.S_ISCHR(mode)):
                    raise option.refuse(f"{name} is not a block or character device on this host")
                continue
            bases = [root] + [root / d for d in directories if option.name in FILE_OPTIONS]
            for real in ((base / name).resolve() for base in bases):
                if real != root and root not in real.parents:
                    raise option.refuse(f"{_CONFINED}; on this host it leads to {real}")
                if real.exists() and (stat.S_ISBLK(real.stat().st_mode) or stat.S_ISCHR(real.stat().st_mode)):
                    raise option.refuse(
                        "a device node on the target; name devices in the backend's allow_devices instead"
                    )
    return job


def load_checked(path: Path, allow_devices: tuple[str, ...] | list[str] = ()) -> JobFile:
    """A user's job file, parsed, checked, and (where fio is installed) accepted by fio --parse-only."""
    import shutil
    import subprocess
    import tempfile

    job = load(path)
    check(job, allow_devices)
    if shutil.which("fio"):
        with tempfile.NamedTemporaryFile("w", suffix=".fio") as flat:
            flat.write(job.text)
            flat.flush()
            parsed = subprocess.run(["fio", "--parse-only", flat.name], capture_output=True, text=True)
        if parsed.returncode != 0:
            reason = (parsed.stderr.strip() or parsed.stdout.strip()).splitlines()
            # fio echoes an unknown option with its value (`Bad option <key=value>`): say the key only.
            said = re.sub(r"<([^=<>]*)=[^<>]*>", r"<\1>", reason[0]) if reason else "rejected"
            raise ValueError(f"{path} is not a valid fio job file (fio: {said})")
    return job


# --- the room a job lays out ----------------------------------------------------------------------

_NUMBER = re.compile(r"\s*(?:0x(?P<hex>[0-9a-f]+)|(?P<dec>[0-9]+)\s*(?P<unit>[a-z]*|%))\s*", re.I)  # hex: no unit
_POWERS = "kmgtp"
_UNITS = ("", "b", "%", *_POWERS, *(power + "b" for power in _POWERS))
# Engines that lay out no data on the target (the others are counted in full, writes too: they fill
# their files as they run).
_NO_DATA = {"null", "filecreate"}
MAX_FILES = 100_000  # files counted per job (numjobs x nrfiles); more is refused rather than guessed


def _size(option: Option | None, kb_base: int) -> tuple[int, bool]:
    """(bytes, is a percentage) of a size option as fio reads it (a range: its top); (0, False) if unset.

    fio's units: k, m, g, t, p (and kb, mb, ...) are powers of kb_base (1024 unless kb_base=1000);
    kib, mib, ... of the other base (fio's own inversion, kept for its old job files).
    """
    if option is None or not option.value:
        return 0, False
    match = _NUMBER.fullmatch(re.split(r"[-:]", option.value)[-1])
    unit = (match["unit"] or "").lower() if match else "?"
    if match is None or not (unit in _UNITS or (len(unit) == 3 and unit[0] in _POWERS and unit.endswith("ib"))):
        raise option.refuse(
            "iolab cannot read this size to know the room the job lays out; write a number with a unit (e.g. 4g)"
        )
    number = int(match["hex"], 16) if match["hex"] else int(match["dec"])
    if unit in ("", "b", "%"):
        return number, unit == "%"
    base = kb_base if unit in _UNITS else 1000 if kb_base == 1024 else 1024
    return number * base ** (_POWERS.index(unit[0]) + 1), False


def _count(option: Option | None) -> int:
    if option is None:
        return 1
    if not (option.value or "").strip().isdigit():
        raise option.refuse("iolab counts the job's files from it: write a whole number")
    return int(option.value or "1")


def _job_files(section: str, options: dict[str, Option]) -> dict[str, int]:
    """The files one job section (its inherited options in `options`) lays out, and how far each reaches."""

    def value(key: str) -> str:
        return (options[key].value or "") if key in options else ""

    if value("ioengine") in _NO_DATA:
        return {}
    kb_base = 1000 if value("kb_base") == "1000" else 1024
    names = [name for name in value("filename").split(":") if name]
    files, clones = len(names) or _count(options.get("nrfiles")), _count(options.get("numjobs"))
    if files * clones > MAX_FILES:
        raise options["numjobs" if "numjobs" in options else "nrfiles"].refuse(
            f"the job has {files * clones} files; iolab counts the room of at most {MAX_FILES} per job"
        )
    size, percent = _size(options.get("size"), kb_base)
    filesize, _ = _size(options.get("filesize"), kb_base)
    if filesize:
        each = filesize * min(size, 100) // 100 if percent else filesize
    elif percent or not size:
        return {}  # a share of files that exist already (fio makes no file without a size)
    else:
        each = size // files
    offset, offset_percent = _size(options.get("offset"), kb_base)
    increment, increment_percent = _size(options.get("offset_increment"), kb_base)
    start = 0 if offset_percent else offset  # a percentage places the I/O inside the file's size
    step = 0 if increment_percent else increment
    pattern = value("filename_format") or "$jobname.$jobnum.$filenum"
    directories = value("directory").split(":")
    extents: dict[str, int] = {}
    for clone in range(clones):
        for index in range(files):
            name = names[index] if names else pattern.replace("$jobname", value("name") or section)
            name = name.replace("$jobnum", str(clone)).replace("$filenum", str(index))
            if not name.startswith("/"):  # an allowed device is not on the target
                path = os.path.normpath(os.path.join(directories[clone % len(directories)], name))
                extents[path] = max(extents.get(path, 0), start + clone * step + each)
    return extents


def layout(job: JobFile) -> dict[str, int]:
    """The files the job lays out on its target, relative to fio's working directory, and how far each
    reaches in bytes, as fio lays them out (tests/unit/test_fio_layout.py compares it with fio's).

    A [global] section applies to the jobs after it; each of numjobs clones has files of its own
    unless a filename (or a filename_format without $jobnum) shares them; a file that several jobs
    name counts once, at its largest; a filesize range counts at its top. Not counted: files that
    size= N% takes a share of (they exist already: fio makes none without a size) and devices.
    """
    extents: dict[str, int] = {}
    inherited: dict[str, Option] = {}
    for section in job.sections:
        own = {option.name: option for option in section.options}
        if section.name == "global":
            inherited.update(own)
            continue
        for path, extent in _job_files(section.name, {**inherited, **own}).items():
            extents[path] = max(extents.get(path, 0), extent)
    return extents
