"""Every file ``ahasd`` writes goes through this module: whole or absent, never half-written.

- :func:`check_folder` and :func:`check_file` refuse a bad output path (a file where a
  folder is needed, a folder where a file should go, a place nobody may write) *before* a
  command starts its work, with a one-line :class:`~ahasd.errors.UserError` naming the path.
- :class:`OutputSet` holds the files one command produces (path -> bytes) until the command
  has produced all of them; :meth:`OutputSet.commit` then stages every changed file as a
  temporary sibling (``.NAME.XXXX.tmp`` in the target's folder) and, only once all are
  staged, renames each into place. A failure while staging (full disk, permissions, a path
  that changed under the command) removes what was staged and the folders the commit
  created: the previous output set stays, or nothing appears. Renames within a folder take
  no space, so the last step does not fail for lack of it.
- A file whose bytes would not change is not rewritten: it keeps its mtime, so builds that
  depend on it stay cached.
- New files get the permissions ``open()`` would give them (``0o666`` less the umask), new
  folders ``0o777`` less the umask; a file rewritten keeps its own permissions.
- An interrupt (Ctrl-C) stops a commit that has not renamed anything yet, even one whose
  KeyboardInterrupt a library swallowed (:func:`mark_interrupted`).
- :func:`write_file` is an output set of one file; :class:`Journal` is the append-only,
  line-per-record file of a resumable sweep (each line flushed and fsynced).
- Only regular files are written or replaced: a target that is a symbolic link (dangling or
  not), a device, a FIFO or a socket is refused, naming it, before any work
  (:func:`check_file`, :func:`check_folder`) and again when written; the files a sweep keeps
  open (its results and its lock) are opened with ``O_NOFOLLOW`` (:func:`open_regular`), so
  a link planted meanwhile is refused too. Renaming over a device node as root would destroy
  it, and writing through a link writes where nobody asked.

Nothing here knows which command runs: the messages name the path and, where given, the
option that named it (``--out``).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from ahasd.errors import UserError

__all__ = [
    "Journal",
    "OutputSet",
    "check_file",
    "check_folder",
    "file_kind",
    "interrupted",
    "mark_interrupted",
    "open_regular",
    "write_file",
]


class _Interrupts:
    """Whether Ctrl-C arrived while the command ran (set by :func:`mark_interrupted`).

    Needed beside the KeyboardInterrupt itself: one raised inside a finalizer (a library's
    ``__del__`` run by the garbage collector mid-elaboration) is printed and dropped by
    Python, and the command would go on to write its files and exit 0.
    """

    seen = False


def mark_interrupted(seen: bool = True) -> None:
    """Record that an interrupt arrived (the command line's SIGINT handler calls it);
    ``False`` clears the record (a new command)."""
    _Interrupts.seen = seen


def interrupted() -> bool:
    """Whether an interrupt was recorded since the last :func:`mark_interrupted` (False)."""
    return _Interrupts.seen


def _stop_if_interrupted() -> None:
    if _Interrupts.seen:
        raise KeyboardInterrupt


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _named(path: Path, option: str | None) -> str:
    return f"{option} {path}" if option else str(path)


def _reason(error: OSError) -> str:
    return error.strerror or type(error).__name__


def _nearest_existing(path: Path) -> Path:
    """``path`` or its closest ancestor that exists (``.`` for a relative path)."""
    current = path
    while not os.path.lexists(current):
        parent = current.parent
        if parent == current:
            break
        current = parent
    return current


def _check_length(path: Path, option: str | None) -> None:
    """UserError naming ``path`` if a component is longer than the file system allows
    (``NAME_MAX``, 255 bytes on Linux) or the whole is longer than ``PATH_MAX``: every
    ``stat`` of it would fail with ENAMETOOLONG, so it is refused before any of them."""
    existing = _nearest_existing_quiet(path)
    try:
        name_max = os.pathconf(existing, "PC_NAME_MAX")
        path_max = os.pathconf(existing, "PC_PATH_MAX")
    except (OSError, ValueError):
        name_max, path_max = 255, 4096
    for part in path.parts:
        size = len(os.fsencode(part))
        if size > name_max:
            raise UserError(
                f"{_named(path, option)}: a name in it is {size} bytes long, more than the "
                f"{name_max} the file system allows"
            )
    size = len(os.fsencode(str(path)))
    if size >= path_max:
        raise UserError(
            f"{_named(path, option)}: is {size} bytes long, more than the {path_max - 1} the "
            "file system allows"
        )


def _nearest_existing_quiet(path: Path) -> Path:
    """The closest ancestor of ``path`` that exists, found without stat-ing a name that is
    too long (``/`` or ``.`` if none)."""
    parts = path.parts
    for count in range(len(parts), 0, -1):
        candidate = Path(*parts[:count])
        try:
            if os.path.lexists(candidate):
                return candidate
        except (OSError, ValueError):
            continue
    return Path("/") if path.is_absolute() else Path(".")


def _probe_writable(folder: Path, path: Path, option: str | None) -> None:
    """UserError unless a file can be created in ``folder`` (tried, not guessed: a read-only
    mount or an ACL is caught too; running as root passes permission bits)."""
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".ahasd-probe-", suffix=".tmp")
    except OSError as error:
        raise UserError(
            f"{_named(path, option)}: cannot write in {folder} ({_reason(error)})"
        ) from None
    os.close(fd)
    os.unlink(probe)


def _check_place(folder: Path, named: Path, option: str | None) -> None:
    """UserError naming ``named`` unless ``folder`` is, or can become, a writable folder."""
    existing = _nearest_existing(folder)
    if not os.path.lexists(existing):
        raise UserError(f"{_named(named, option)}: no existing folder above it")
    if not existing.is_dir():
        where = "is a file" if existing == named else f"{existing} is a file"
        raise UserError(f"{_named(named, option)}: {where}, not a folder")
    _probe_writable(existing, named, option)


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words (``a FIFO``, ``a symbolic link``)."""
    for test, name in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _refuse_special(path: Path, option: str | None) -> None:
    """UserError unless ``path`` is absent or a regular file (a link is not followed)."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return  # absent (a file above it is the folder check's to report)
    except OSError as error:
        raise UserError(f"{_named(path, option)}: cannot inspect ({_reason(error)})") from None
    if not stat.S_ISREG(mode):
        raise UserError(
            f"{_named(path, option)}: is {file_kind(mode)}, not a regular file; refusing to write "
            "to it or replace it"
        )


def open_regular(path, flags: int, *, option: str | None = None, mode: int = 0o666) -> int:
    """``os.open(path, flags | O_NOFOLLOW)`` on a regular file (created if ``O_CREAT`` is in
    ``flags``); a file descriptor. A symbolic link, a folder or a special file is a
    UserError naming ``path``: nothing is read or written through it.
    """
    path = Path(path)
    _refuse_special(path, option)
    try:
        # O_NONBLOCK: a FIFO swapped in after the check must not hang the open.
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as error:
        if os.path.islink(path):
            _refuse_special(path, option)
        raise UserError(f"{_named(path, option)}: cannot open ({_reason(error)})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise UserError(
            f"{_named(path, option)}: is {file_kind(info.st_mode)}, not a regular file; refusing "
            "to write to it or replace it"
        )
    os.set_blocking(fd, True)
    return fd


def check_folder(path, *, option: str | None = None, files=()) -> Path:
    """Refuse ``path`` as an output folder unless it is (or can become) a writable folder
    in which none of the names ``files`` is taken by a folder.

    Nothing is created: a missing folder is checked through its nearest existing ancestor.
    Returns ``path`` as a :class:`~pathlib.Path`.
    """
    path = Path(path)
    _check_length(path, option)
    for name in files:
        _check_length(path / name, option)
        if (path / name).is_dir():
            raise UserError(f"{_named(path / name, option)}: is a folder, not a file")
        _refuse_special(path / name, option)
    _check_place(path, path, option)
    return path


def check_file(path, *, option: str | None = None) -> Path:
    """Refuse ``path`` as an output file if it is a folder, a symbolic link or a special
    file (device, FIFO, socket), or if its folder cannot be written."""
    path = Path(path)
    _check_length(path, option)
    if path.is_dir():
        raise UserError(f"{_named(path, option)}: is a folder, not a file")
    if path.name in ("", ".", ".."):
        raise UserError(f"{_named(path, option)}: names no file")
    _refuse_special(path, option)
    _check_place(path.parent, path, option)
    return path


def _unchanged(path: Path, data: bytes) -> bool:
    try:
        return path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data
    except OSError:
        return False


class OutputSet:
    """The files of one command, written together by :meth:`commit` (module docstring).

    Parameters
    ----------
    option : the command-line option that named the destination (``"--out"``), quoted in
        error messages; None when the paths come from elsewhere.

    Members
    -------
    files : ``{path: bytes}`` added so far, in order.
    """

    def __init__(self, *, option: str | None = None) -> None:
        self.option = option
        self.files: dict[Path, bytes] = {}

    def add(self, path, data: str | bytes) -> None:
        """Hold ``data`` (text is UTF-8 encoded) for ``path``; nothing is written yet."""
        path = Path(path)
        if path.is_dir():
            raise UserError(f"{_named(path, self.option)}: is a folder, not a file")
        self.files[path] = data.encode("utf-8") if isinstance(data, str) else bytes(data)

    def commit(self) -> dict[Path, bool]:
        """Write every held file whose bytes changed; ``{path: written}`` in order.

        Raises
        ------
        ahasd.errors.UserError
            naming the path that could not be written; nothing of this set is left behind.
        """
        _stop_if_interrupted()  # an interrupt that was swallowed on the way still stops it
        for path in self.files:
            check_file(path, option=self.option)
        changed = {path: not _unchanged(path, data) for path, data in self.files.items()}
        default_mode = 0o666 & ~_umask()
        created: list[Path] = []
        staged: list[tuple[Path, Path]] = []
        current = None
        try:
            for path, data in self.files.items():
                if not changed[path]:
                    continue
                current = path
                created += _make_folders(path.parent)
                staged.append((_stage(path, data, _kept_mode(path, default_mode)), path))
            _stop_if_interrupted()
            for temporary, path in staged:
                current = path
                os.replace(temporary, path)
        except OSError as error:
            _undo(staged, created)
            raise UserError(
                f"{_named(current, self.option)}: cannot write ({_reason(error)}); "
                "nothing of this output set was written"
            ) from None
        except BaseException:
            _undo(staged, created)
            raise
        return changed


def _kept_mode(path: Path, default: int) -> int:
    """The permissions a rewrite of ``path`` gets: the file's own if it exists (a user who
    made an output read-only for others, or executable, keeps that), else ``default``."""
    try:
        info = os.lstat(path)
    except OSError:
        return default
    return stat.S_IMODE(info.st_mode) if stat.S_ISREG(info.st_mode) else default


def _make_folders(folder: Path) -> list[Path]:
    """Create ``folder`` and missing parents (umask applies); the ones created, top first."""
    missing = []
    while not os.path.lexists(folder):
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    created = []
    for item in reversed(missing):
        os.mkdir(item)
        created.append(item)
    return created


def _stage(path: Path, data: bytes, mode: int) -> Path:
    """Write ``data`` to a temporary sibling of ``path`` (fsynced, ``mode``); its path."""
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(name, mode)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return Path(name)


def _undo(staged: list[tuple[Path, Path]], created: list[Path]) -> None:
    for temporary, _ in staged:
        temporary.unlink(missing_ok=True)
    for folder in reversed(created):
        # A folder something else has put a file into meanwhile stays.
        with contextlib.suppress(OSError):
            folder.rmdir()


def write_file(path, data: str | bytes, *, option: str | None = None) -> bool:
    """Write one file as an :class:`OutputSet` of one; True if it was (re)written."""
    outputs = OutputSet(option=option)
    outputs.add(path, data)
    return outputs.commit()[Path(path)]


class Journal:
    """An append-only file of one JSON record per line (a sweep's ``results.jsonl``).

    Opening keeps the first ``valid_bytes`` (what the reader found whole: a killed run's
    half-written last line is left out) and ends them with a newline if they lack one, so
    that appends start on a line boundary; every :meth:`append` is flushed and fsynced
    before it returns, so what a killed run finished is kept.

    Parameters
    ----------
    path : the file (created with the umask's permissions if missing; a symbolic link or a
        special file is refused, :func:`open_regular`).
    valid_bytes : the length of its whole records (what to keep).
    option : the option that named the folder, for error messages.
    """

    def __init__(self, path, *, valid_bytes: int, option: str | None = None) -> None:
        self.path = Path(path)
        self.option = option
        check_file(self.path, option=option)
        try:
            _make_folders(self.path.parent)
            flags = os.O_RDWR | os.O_APPEND | os.O_CREAT
            fd = open_regular(self.path, flags, option=option)
            self.handle = os.fdopen(fd, "ab")
            if os.fstat(fd).st_size != valid_bytes:
                # Only when there is a cut line to drop: truncate() sets the mtime even when
                # the size does not change, and a resumed sweep with nothing to run must
                # leave its results file as it was.
                self.handle.truncate(valid_bytes)
            if valid_bytes and os.pread(fd, 1, valid_bytes - 1) != b"\n":
                # A whole last record saved without its newline: end it, keep it.
                self.handle.write(b"\n")
                self.handle.flush()
                os.fsync(fd)
        except OSError as error:
            raise UserError(
                f"{_named(self.path, option)}: cannot open for appending ({_reason(error)})"
            ) from None

    def append(self, line: str) -> None:
        """Append ``line`` and a newline, durably."""
        try:
            self.handle.write((line + "\n").encode("utf-8"))
            self.handle.flush()
            os.fsync(self.handle.fileno())
        except OSError as error:
            raise UserError(
                f"{_named(self.path, self.option)}: cannot append ({_reason(error)}); the "
                "finished runs before this one are kept"
            ) from None

    def close(self) -> None:
        self.handle.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
