"""Small real filesystems for store tests: a tmpfs that fills up, a file mounted read-only.

Both need mount(2), so root (or CAP_SYS_ADMIN); without it the test that asked is skipped with the
reason, never faked.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def can_mount() -> bool:
    return os.geteuid() == 0


@contextmanager
def small_filesystem(directory: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (`8m`) mounted on `directory`, unmounted afterwards."""
    if not can_mount():
        pytest.skip("a full disk needs a small filesystem: mount(2) needs root")
    directory.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory))
    try:
        yield directory
    finally:
        unmount(directory)


def mount_read_only(file: Path) -> None:
    """`file` read-only for every process, root included (root ignores file modes): bind-mounted
    read-only onto itself until `unmount(file)`."""
    if not can_mount():
        pytest.skip("a read-only file for root needs a read-only bind mount: mount(2) needs root")
    _mount("--bind", str(file), str(file))
    _mount("-o", "remount,bind,ro", str(file))


def unmount(target: Path) -> None:
    """Undo `mount_read_only` or `small_filesystem`; nothing if nothing is mounted there."""
    subprocess.run(["umount", "-l", str(target)], check=False, capture_output=True)


def fill(directory: Path, name: str = "filler") -> Path:
    """Take every free byte of `directory`'s filesystem with one file; return it (delete it to free)."""
    filler = directory / name
    chunk = b"\0" * 65_536
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        while True:
            os.write(descriptor, chunk)  # a short write near the end, then ENOSPC
    except OSError:
        pass
    finally:
        os.close(descriptor)
    return filler


def _mount(*arguments: str) -> None:
    subprocess.run(["mount", *arguments], check=True, capture_output=True)
