"""The pipeline on streamed datasets for real: a RecordIO pair and a folder of class folders
(JPEGs of mixed sizes) are staged as indexes, trained on by 2 MPI ranks that decode their own
images, summarised with the data_s column, and verified by `snakemake verify`."""

import json

import pytest
from helpers import SNAKEMAKE, read_rows, snakemake, write_image_recordio

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(not SNAKEMAKE.exists(), reason="make setup builds .venv-workflow"),
]


def write_image_folder(root, rec):
    """The images of a RecordIO pair as root/<label>/<key>.jpg."""
    import mxnet as mx

    reader = mx.recordio.MXIndexedRecordIO(str(rec.with_suffix(".idx")), str(rec), "r")
    for key in reader.keys:
        header, payload = mx.recordio.unpack(reader.read_idx(key))
        folder = root / f"class-{int(header.label)}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{key}.jpg").write_bytes(payload)
    reader.close()
    return root


def test_the_pipeline_trains_and_verifies_streamed_datasets(tmp_path):
    rec = write_image_recordio(tmp_path / "digits.rec", 500)
    folder = write_image_folder(tmp_path / "digits", rec)
    override = {
        "datasets": {
            "jpeg-rec": {"source": "recordio", "path": str(rec)},
            "jpeg-folder": {"source": "images", "path": str(folder)},
        },
        "grid": {"dataset": ["jpeg-rec", "jpeg-folder"]},
        "training": {"stream": {"input_size": 16, "decode_workers": 1}},
    }
    results = tmp_path / "results"
    run = snakemake(results=results, override=override)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = read_rows(results / "summary.csv")
    assert sorted((r["dataset"], r["policy"]) for r in summary) == [
        ("jpeg-folder", "adaptive"),
        ("jpeg-folder", "static"),
        ("jpeg-rec", "adaptive"),
        ("jpeg-rec", "static"),
    ]
    manifest = json.loads((results / "data" / "jpeg-folder" / "manifest.json").read_text())
    assert manifest["storage"] == "stream" and manifest["class_names"][:2] == [
        "class-0",
        "class-1",
    ]
    staged = sum(f.stat().st_size for f in (results / "data" / "jpeg-rec").iterdir())
    assert staged < rec.stat().st_size / 4  # an index, not a copy of the pixels
    train = results / "runs" / "jpeg-rec-mlp-adaptive-slowdown-1-3-r2-s0" / "train"
    rows = read_rows(train / "iterations.csv")
    assert all(float(r["data_s"]) > 0 for r in rows)
    verified = snakemake("verify", results=results, override=override)
    assert verified.returncode == 0, verified.stderr[-3000:]
    report = json.loads((results / "verify" / "jpeg-rec.json").read_text())
    assert report["images"] == 500 and report["bad"] == []
