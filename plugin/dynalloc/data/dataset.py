"""Opening a staged dataset of either kind: arrays the ranks memory-map (`staged`) or an index
of images streamed from where they lie (`streamed`); the manifest says which."""

import json
from pathlib import Path

from dynalloc.data.staged import load_staged
from dynalloc.data.stagedir import MANIFEST_NAME
from dynalloc.data.streamed import StreamedDataset, is_streamed, load_streamed
from dynalloc.errors import DynallocError
from dynalloc.experiment.stream_config import STREAM_DEFAULTS


def open_dataset(path, verify=True):
    """A StagedDataset or a StreamedDataset, checked (`verify`: every byte of the arrays; a
    streamed dataset's checks always take time in proportion to its index only)."""
    path = Path(path)
    manifest_path = path / MANIFEST_NAME
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        manifest = None  # load_staged says what is wrong with it
    if is_streamed(manifest):
        return load_streamed(path, manifest)
    if not path.is_dir():
        raise DynallocError(f"{path}: staged dataset directory not found")
    return load_staged(path, verify=verify)


def input_shape(data, config):
    """One sample's (channels, height, width) as the network sees it."""
    stream = config["stream"]
    if not isinstance(data, StreamedDataset):
        if stream != STREAM_DEFAULTS:
            raise DynallocError(
                f"config key 'stream' applies to streamed datasets (recordio, images); "
                f"{data.path} holds arrays"
            )
        return tuple(data.input_shape)
    size = stream["input_size"] or data.image_size
    if size is None:
        sizes = data.manifest["image_sizes"]
        small, large = sizes["smallest"], sizes["largest"]
        raise DynallocError(
            f"stream.input_size: the images of {data.path} range from {small[0]}x{small[1]} to "
            f"{large[0]}x{large[1]} pixels; set the size the network takes"
        )
    for key in ("mean", "std"):
        values = stream[key]
        if values is not None and len(values) not in (1, data.channels):
            raise DynallocError(
                f"stream.{key}: {len(values)} values for images of {data.channels} channel(s)"
            )
    return (data.channels, *size)
