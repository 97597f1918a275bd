"""A streamed dataset: the images stay in their RecordIO files or folders; staging leaves an
index and a manifest beside them, and each rank reads its own samples by offset.

The staged directory holds `manifest.json` and, per split, `{split}_index.npy` (one 41-byte
row per image: key, file, offset, length, label, height, width, channels), plus
`{split}_paths.npy` (the images' paths under the folder) for an image folder. The ranks
memory-map the indexes, so a rank's memory does not grow with the number of images. Opening
one (`load_streamed`) checks the manifest, the sha256 of the index files and of every source
`.idx`, and the size of every `.rec`: time in proportion to the index, not to the data
(`dynalloc verify` decodes it all).
"""

import dataclasses
import os
import threading
from pathlib import Path

import numpy as np

from dynalloc import __version__
from dynalloc.data.records import BadRecord, read_record, unpack
from dynalloc.data.stagedir import (
    MANIFEST_NAME,
    file_sha256,
    save_array,
    staging_directory,
    write_manifest,
)
from dynalloc.errors import DynallocError
from dynalloc.experiment.stream_config import default_crop_scale

STORAGE = "stream"
FORMAT_VERSION = 1
SPLITS = ("train", "test")
INDEX_DTYPE = np.dtype(
    [
        ("key", "<i8"),  # the record's key in its .idx, or the image's number in its folder
        ("file", "<i4"),  # which .rec of manifest["files"], or the row of {split}_paths.npy
        ("offset", "<i8"),
        ("length", "<i8"),  # bytes on disk (a record's parts and padding; a file's size)
        ("label", "<i4"),
        ("height", "<i4"),
        ("width", "<i4"),
        ("channels", "u1"),  # 1 for a grayscale image, else 3
    ]
)
MANIFEST_KEYS = (
    "format_version",
    "storage",
    "source",
    "classes",
    "channels",
    "files",
    "splits",
    "sha256",
)


def is_streamed(manifest):
    return isinstance(manifest, dict) and manifest.get("storage") == STORAGE


@dataclasses.dataclass(eq=False)
class StreamedDataset:
    """The index of a streamed dataset and the reading of one image's bytes by its position."""

    path: Path
    manifest: dict
    index: dict  # split -> memory-mapped INDEX_DTYPE rows
    paths: dict  # split -> memory-mapped relative paths (an image folder), else {}

    def __post_init__(self):
        self._fds, self._lock = {}, threading.Lock()

    @property
    def source(self):
        return self.manifest["source"]

    @property
    def classes(self):
        return self.manifest["classes"]

    @property
    def channels(self):
        return self.manifest["channels"]

    @property
    def image_size(self):
        """(height, width) when every image has it, else None."""
        size = self.manifest.get("image_size")
        return tuple(size) if size else None

    def default_crop_scale(self):
        """The training crop's scale when the run config leaves `stream.crop_scale` out: by the
        shorter side of the smallest image (`experiment.stream_config.default_crop_scale`)."""
        return default_crop_scale(min(self.manifest["image_sizes"]["smallest"]))

    @property
    def train_size(self):
        return len(self.index["train"])

    @property
    def test_size(self):
        return len(self.index["test"])

    def name(self, split, i):
        """Where sample `i` of `split` lies, for messages: 'FILE: record KEY' or its path."""
        row = self.index[split][i]
        if self.source == "images":
            return str(self._image_path(split, row))
        return f"{self.manifest['files'][row['file']]['path']}: record {row['key']}"

    def read(self, split, i):
        """(label, encoded image) of sample `i` of `split`; BadRecord names the file and record
        if its bytes are missing or broken."""
        row = self.index[split][i]
        if self.source == "images":
            path = self._image_path(split, row)
            try:
                return int(row["label"]), path.read_bytes()
            except OSError as error:
                raise BadRecord(f"{path}: cannot read ({error.strerror or error})") from None
        rec = self.manifest["files"][row["file"]]["path"]
        record = read_record(self._fd(rec), int(row["offset"]), int(row["length"]), rec, row["key"])
        label, payload = unpack(record, rec, row["key"])
        if label != row["label"]:
            raise BadRecord(
                f"{rec}: record {row['key']} has label {label}, staged as {row['label']}"
            )
        return label, payload

    def _image_path(self, split, row):
        relative = self.paths[split][row["file"]].decode("utf-8")
        files = self.manifest["files"]  # the folder, and the validation folder if there is one
        root = files[1]["path"] if split == "test" and len(files) > 1 else files[0]["path"]
        return Path(root, relative)

    def _fd(self, path):
        with self._lock:
            if path not in self._fds:
                try:
                    self._fds[path] = os.open(path, os.O_RDONLY)
                except OSError as error:
                    raise DynallocError(f"{path}: cannot open ({error.strerror})") from None
            return self._fds[path]


def write_streamed(out_dir, index, paths, manifest):
    """Write the index files and then the manifest into a sibling directory and rename it to
    `out_dir`, so that `out_dir` ends up either complete or untouched."""
    out_dir = Path(out_dir)
    manifest = {
        "format_version": FORMAT_VERSION,
        "storage": STORAGE,
        **manifest,
        "splits": {},
        "sha256": {},
        "dynalloc_version": __version__,
    }
    with staging_directory(out_dir) as tmp_dir:
        for split in SPLITS:
            names = [f"{split}_index.npy"]
            save_array(tmp_dir, names[0], np.ascontiguousarray(index[split], INDEX_DTYPE), manifest)
            if paths:
                names.append(f"{split}_paths.npy")
                save_array(tmp_dir, names[1], np.asarray(paths[split], dtype=bytes), manifest)
            manifest["splits"][split] = {"n": len(index[split]), "files": names}
        write_manifest(tmp_dir, manifest)
    return out_dir


def load_streamed(path, manifest):
    """Open the streamed dataset at `path` whose manifest is `manifest`, after the checks that
    take time in proportion to the index (module docstring)."""
    path = Path(path)
    missing = [key for key in MANIFEST_KEYS if key not in manifest]
    if missing:
        raise DynallocError(f"{path / MANIFEST_NAME}: missing key(s) {', '.join(missing)}")
    if manifest["format_version"] != FORMAT_VERSION:
        raise DynallocError(
            f"{path / MANIFEST_NAME}: format_version {manifest['format_version']!r} is not "
            f"{FORMAT_VERSION}"
        )
    for split in SPLITS:  # every index file is vouched for, not only those the manifest names
        entry = manifest["splits"].get(split) if isinstance(manifest["splits"], dict) else None
        if not isinstance(entry, dict) or "n" not in entry:
            raise DynallocError(f"{path / MANIFEST_NAME}: splits.{split}.n missing")
        names = [f"{split}_index.npy", *entry.get("files", [])]
        unvouched = [name for name in names if name not in manifest["sha256"]]
        if unvouched:
            raise DynallocError(f"{path / MANIFEST_NAME}: lists no sha256 of {unvouched[0]}")
    for name, digest in manifest["sha256"].items():
        if not (path / name).is_file():
            raise DynallocError(f"{path / name}: index file missing (listed in {MANIFEST_NAME})")
        if file_sha256(path / name) != digest:
            raise DynallocError(
                f"{path / name}: sha256 differs from {MANIFEST_NAME}: the file is corrupted"
            )
    for source in manifest["files"]:
        _check_source(Path(source["path"]), source)
    index, paths = {}, {}
    for split in SPLITS:
        index[split] = np.load(path / f"{split}_index.npy", mmap_mode="r")
        if index[split].dtype != INDEX_DTYPE or len(index[split]) != manifest["splits"][split]["n"]:
            raise DynallocError(
                f"{path / f'{split}_index.npy'}: not the index {MANIFEST_NAME} lists"
            )
        if (path / f"{split}_paths.npy").is_file():
            paths[split] = np.load(path / f"{split}_paths.npy", mmap_mode="r")
    return StreamedDataset(path=path, manifest=manifest, index=index, paths=paths)


def _check_source(path, source):
    """The source files are still those staged: a .rec of the same size beside the same .idx;
    an image folder that still exists."""
    if not path.exists():
        raise DynallocError(f"{path}: staged source missing (moved or deleted?); stage again")
    if "index" in source:
        size = path.stat().st_size
        if size != source["bytes"]:
            raise DynallocError(
                f"{path}: {size} bytes, but {source['bytes']} when staged: the file changed; "
                "stage it again"
            )
        idx = Path(source["index"])
        if not idx.is_file() or file_sha256(idx) != source["index_sha256"]:
            raise DynallocError(f"{idx}: missing or changed since staging; stage it again")
