"""Writing a staged dataset's directory (arrays or a streamed index) so that it ends up either
complete or untouched: its files go into a fresh sibling directory, manifest last, which is then
renamed into place."""

import contextlib
import hashlib
import json
import os
import secrets
import shutil

import numpy as np

from dynalloc.errors import DynallocError
from dynalloc.fsutil import atomic_write, fsync_directory

MANIFEST_NAME = "manifest.json"


def file_sha256(path):
    """Hex sha256 of a file, read in chunks so that large files need little memory."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


@contextlib.contextmanager
def staging_directory(out_dir):
    """A fresh directory beside `out_dir` to write a staged dataset into, renamed over `out_dir`
    when the block ends well and removed when it does not: `out_dir` ends up complete or
    untouched. An earlier staged dataset there is replaced, anything else refused."""
    refuse_to_replace_foreign(out_dir)
    tmp_dir = make_sibling_tmp_dir(out_dir)
    try:
        yield tmp_dir
        fsync_directory(tmp_dir)
        move_into_place(tmp_dir, out_dir)
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise


def save_array(directory, name, array, manifest):
    """`array` as directory/name (.npy), its sha256 recorded in manifest["sha256"]."""
    with atomic_write(directory / name, "wb") as handle:
        np.save(handle, array)
    manifest["sha256"][name] = file_sha256(directory / name)


def write_manifest(directory, manifest):
    """The manifest, last: a directory without one is no staged dataset."""
    with atomic_write(directory / MANIFEST_NAME) as handle:
        json.dump(manifest, handle, indent=2)
        handle.write("\n")


def refuse_to_replace_foreign(out_dir):
    """Replace an earlier staged dataset, never a directory of something else (say $HOME)."""
    if out_dir.is_symlink() or (out_dir.exists() and not out_dir.is_dir()):
        raise DynallocError(f"{out_dir}: exists and is not a directory")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not (out_dir / MANIFEST_NAME).is_file():
        raise DynallocError(
            f"{out_dir}: exists and holds no {MANIFEST_NAME}; refusing to replace it"
        )


def make_sibling_tmp_dir(out_dir):
    """A fresh directory beside `out_dir`, so that the final rename stays on one file system."""
    parent = out_dir.parent
    tmp_dir = parent / f".{out_dir.name}.{secrets.token_hex(4)}.tmp"
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp_dir.mkdir()  # unlike mkdtemp, honours the umask: other users may read the data
    except OSError as error:
        raise DynallocError(f"{parent}: cannot create the output directory ({error})") from None
    return tmp_dir


def move_into_place(tmp_dir, out_dir):
    if out_dir.exists():
        old_dir = tmp_dir.with_name(tmp_dir.name + ".old")
        os.rename(out_dir, old_dir)
        try:
            os.rename(tmp_dir, out_dir)
        except BaseException:
            os.rename(old_dir, out_dir)
            raise
        shutil.rmtree(old_dir)
    else:
        os.rename(tmp_dir, out_dir)
    fsync_directory(out_dir.parent)
