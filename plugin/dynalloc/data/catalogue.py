"""Staging a streamed dataset: one pass over the headers and labels of a RecordIO pair or an
image folder, never over the pixels, into the rows of `streamed.INDEX_DTYPE`.

A record's framing, its label and its image header (size and channels) are read; its pixels
are not. Memory is bounded by the index itself (40 bytes an image), whatever the images weigh.
"""

import os
from pathlib import Path

import numpy as np

from dynalloc.data.images import image_info
from dynalloc.data.progress import Progress
from dynalloc.data.records import BadRecord, read_pair, read_record, record_span, unpack
from dynalloc.data.stagedir import file_sha256
from dynalloc.data.streamed import INDEX_DTYPE
from dynalloc.errors import DynallocError

HEAD_BYTES = 4096  # enough for a JPEG's markers up to its frame header, as a rule
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


def catalogue_recordio(rec_path, file_number):
    """(rows, source entry) of a `.rec` and the `.idx` beside it, rows in the index's order."""
    rec_path = Path(rec_path).absolute()
    idx_path, keys, offsets = read_pair(rec_path)
    size = rec_path.stat().st_size
    rows = np.zeros(len(keys), INDEX_DTYPE)
    rows["key"], rows["offset"], rows["file"] = keys, offsets, file_number
    progress = Progress(len(keys), f"indexing {rec_path.name}")
    with open(rec_path, "rb", buffering=1 << 20) as handle:
        for i in np.argsort(offsets, kind="stable"):  # in file order: reads that move forward
            key = int(keys[i])
            length, head = record_span(
                handle, size, int(offsets[i]), str(rec_path), key, HEAD_BYTES
            )
            label, image = unpack(head, str(rec_path), key)
            where = (handle, int(offsets[i]), length, rec_path, key)
            # `image` is `head` less the record's header: `head` tells whether the read was cut.
            cut = len(head) >= HEAD_BYTES
            info = _info(image, cut, lambda where=where: _whole(*where))
            if info is None:
                raise BadRecord(f"{rec_path}: record {key} is not a JPEG or PNG image")
            rows[i]["length"], rows[i]["label"] = length, label
            rows[i]["height"], rows[i]["width"] = info[:2]
            rows[i]["channels"] = info[2]
            progress.update()
    progress.close()
    entry = {
        "path": str(rec_path),
        "bytes": size,
        "index": str(idx_path),
        "index_sha256": file_sha256(idx_path),
    }
    return rows, entry


def catalogue_images(root, class_names=None):
    """(rows, relative paths, class names, source entry) of a folder with one sub-folder per
    class (ImageNet's layout; names sorted as Gluon's ImageFolderDataset sorts them). A
    validation folder passes the training folder's `class_names`: it may lack a class, not add
    one. Files and folders whose names start with '.' are skipped."""
    root = Path(root).absolute()
    if not root.is_dir():
        raise DynallocError(f"{root}: image folder not found")
    folders = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    strays = sorted(p.name for p in root.iterdir() if p.is_file() and not p.name.startswith("."))
    if strays:
        raise DynallocError(
            f"{root / strays[0]}: a file beside the class folders; each image "
            "belongs in the folder of its class"
        )
    if not folders:
        raise DynallocError(f"{root}: holds no class folders (one sub-folder per class)")
    if class_names is None:
        class_names = folders
    unknown = sorted(set(folders) - set(class_names))
    if unknown:
        raise DynallocError(f"{root / unknown[0]}: a class the training folder does not have")
    files = []
    for name in folders:
        found = sorted(_images_under(root / name))
        if not found:
            raise DynallocError(f"{root / name}: empty class folder (no JPEG or PNG images)")
        files += [(path, class_names.index(name)) for path in found]
    rows = np.zeros(len(files), INDEX_DTYPE)
    paths = []
    progress = Progress(len(files), f"indexing {root.name}")
    for i, (path, label) in enumerate(files):
        try:
            with open(path, "rb") as handle:
                head = handle.read(HEAD_BYTES)
                cut = len(head) >= HEAD_BYTES
                info = _info(head, cut, lambda h=handle: h.seek(0) or h.read())
                size = os.fstat(handle.fileno()).st_size
        except OSError as error:
            raise DynallocError(f"{path}: cannot read ({error.strerror or error})") from None
        if info is None:
            raise DynallocError(f"{path}: not a JPEG or PNG image")
        rows[i] = (i, i, 0, size, label, info[0], info[1], info[2])
        paths.append(str(path.relative_to(root)).encode("utf-8"))
        progress.update()
    progress.close()
    entry = {"path": str(root), "images": len(files), "bytes": int(rows["length"].sum())}
    return rows, paths, class_names, entry


def _images_under(folder):
    for directory, subdirs, names in os.walk(folder):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        for name in names:
            if name.startswith("."):
                continue
            path = Path(directory, name)
            if path.suffix.lower() not in IMAGE_SUFFIXES:
                raise DynallocError(f"{path}: not an image (JPEG or PNG files only)")
            yield path


def _info(head, cut, whole):
    """image_info of the first bytes, or of all of them (`whole()`) when those were `cut` short
    of the image's end and the frame header lies further."""
    info = image_info(head)
    return info if info is not None or not cut else image_info(whole())


def _whole(handle, offset, length, rec_path, key):
    record = read_record(handle.fileno(), offset, length, str(rec_path), key)
    return unpack(record, str(rec_path), key)[1]
