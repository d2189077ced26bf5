"""One way to write a file so that readers never see it half-written.

:func:`atomic_path` hands out a temporary path next to the target, named
``.<target name>.<pid>.<random><suffix>`` (the pid lets a resumed run recognise
and remove leftovers of a killed writer, see
:func:`experiments.runner.remove_stale_temporaries`). When the block succeeds the
file gets ordinary permissions (``0o666`` minus the process umask, not
``mkstemp``'s 0600) and is renamed onto the target with :func:`os.replace`, which is
atomic on one filesystem; when it raises, the temporary file is removed and the
target is left as it was.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _read_umask() -> int:
    """The process umask (read once at import: reading it means setting it)."""
    current = os.umask(0o022)
    os.umask(current)
    return current


UMASK = _read_umask()
FILE_MODE = 0o666 & ~UMASK
DIR_MODE = 0o777 & ~UMASK


def temp_prefix(path: Path) -> str:
    """Prefix of every temporary name this process uses for ``path``."""
    return f".{path.name}.{os.getpid()}."


@contextmanager
def atomic_path(path: str | os.PathLike[str], suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path; on success it replaces ``path``, on failure it is removed."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=temp_prefix(target), suffix=suffix)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
