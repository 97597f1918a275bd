"""`dynalloc.data.readahead`: Decoder and ReadAhead decoding a small staged RecordIO dataset for
real, with no worker and with two: the pixels of a sample depend on nothing but (seed, epoch,
split, position); a take returns exactly what it asks; bad records stop or are replaced."""

import shutil

import numpy as np
import pytest
from dynalloc.data import readahead
from dynalloc.data.dataset import open_dataset
from dynalloc.data.readahead import MOVES_REMEMBERED, Decoder, ReadAhead
from dynalloc.data.records import BadRecord
from dynalloc.experiment.stream_config import check_stream
from streamed_files import image_rec, smooth, stage

SIZE = (8, 8)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """(folder, .rec, staged directory): 30 PNGs, colour and gray, of mixed sizes, 3 classes."""
    folder = tmp_path_factory.mktemp("readahead")
    rng = np.random.default_rng(0)
    shapes = [(12, 10, 3), (9, 16, 3), (20, 20), (7, 11, 3), (15, 9)]
    images = [smooth(rng, shapes[k % 5]) ^ rng.integers(0, 32, shapes[k % 5], np.uint8)
              for k in range(30)]  # fmt: skip
    rec = image_rec(folder / "set.rec", images, np.arange(30) % 3)
    assert stage(folder / "out", "--source", "recordio", "--path", rec, "--seed", 1) == 0
    return folder, rec, folder / "out"


@pytest.fixture(scope="module")
def data(source):
    return open_dataset(source[2])


def decoder(data, seed=5, **stream):
    return Decoder(data, SIZE, resolved(data, stream), seed)


def resolved(data, stream):
    """The stream section as a run's set-up resolves it (the crop scale by the images' size)."""
    stream = check_stream(stream)
    stream["crop_scale"] = stream["crop_scale"] or data.default_crop_scale()
    return stream


@pytest.fixture
def damaged(source, tmp_path):
    """A copy of the source staged, then one train record's pixels or framing damaged in place:
    (dataset, its .rec, damage(position, how))."""
    rec = tmp_path / "set.rec"
    shutil.copy(source[1], rec)
    shutil.copy(source[1].with_suffix(".idx"), rec.with_suffix(".idx"))
    assert stage(tmp_path / "out", "--source", "recordio", "--path", rec, "--seed", 1) == 0
    dataset = open_dataset(tmp_path / "out")

    def damage(position, how="pixels"):
        row = dataset.index["train"][position]
        content = bytearray(rec.read_bytes())
        at = int(row["offset"]) + (8 + 24 + 41 if how == "pixels" else 0)  # in IDAT, or magic
        content[at : at + 4] = b"\0\0\0\0" if how == "framing" else b"oops"
        rec.write_bytes(bytes(content))
        return f"{rec}: record {row['key']}"

    return dataset, rec, damage


def test_the_same_positions_give_the_same_pixels_whatever_the_order_chunks_or_workers(data):
    dec = decoder(data)
    positions = np.random.default_rng(1).permutation(data.train_size)[:16]
    ref = dec.chunk("train", 1, positions)
    assert ref.images.shape == (16, *SIZE, 3) and ref.images.dtype == np.uint8
    np.testing.assert_array_equal(ref.labels, data.index["train"]["label"][positions])
    assert ref.replaced == []
    reverse = dec.chunk("train", 1, positions[::-1])
    np.testing.assert_array_equal(reverse.images, ref.images[::-1])
    for i, p in enumerate(positions[:5]):
        np.testing.assert_array_equal(dec.chunk("train", 1, [p]).images[0], ref.images[i])
    for workers in (0, 2):
        ahead = ReadAhead(decoder(data), workers)
        try:
            ahead.request("train", 1, positions[:10], (positions[10:12], positions[12:]))
            images, labels, replaced = ahead.take("train", 1, positions)
            np.testing.assert_array_equal(images, ref.images)
            np.testing.assert_array_equal(labels, ref.labels)
            assert replaced == []
            # cut into other chunks
            ahead.request("train", 1, positions[3:7], (positions[:3],))
            images, _, _ = ahead.take("train", 1, positions[::-1])
            np.testing.assert_array_equal(images, ref.images[::-1])
        finally:
            ahead.close()


def test_pixels_change_with_the_epoch_and_seed_but_not_for_the_test_split(data):
    positions = np.arange(12)
    dec = decoder(data)
    epoch_1 = dec.chunk("train", 1, positions).images
    assert not np.array_equal(dec.chunk("train", 2, positions).images, epoch_1)
    assert not np.array_equal(decoder(data, seed=6).chunk("train", 1, positions).images, epoch_1)
    test = dec.chunk("test", 0, np.arange(data.test_size))
    np.testing.assert_array_equal(dec.chunk("test", 3, np.arange(data.test_size)).images,
                                  test.images)  # fmt: skip
    np.testing.assert_array_equal(
        decoder(data, seed=9).chunk("test", 0, np.arange(data.test_size)).images, test.images
    )
    # Without flips and with the whole image, training pixels are the evaluation's at crop 1.
    whole = decoder(data, crop_scale=[1, 1], crop_ratio=[0.1, 10], flip=False, eval_crop=1.0)
    square = [i for i, r in enumerate(data.index["train"]) if r["height"] == r["width"]]
    np.testing.assert_array_equal(whole.chunk("train", 4, square).images,
                                  whole.chunk("train", 9, square).images)  # fmt: skip


def test_a_take_returns_exactly_the_positions_asked_after_a_request_of_others(data):
    dec = decoder(data)
    ahead = ReadAhead(dec, 2)
    try:
        ahead.request("train", 0, np.arange(0, 8), (np.arange(8, 10), np.arange(10, 12)))
        asked = np.array([13, 5, 6, 7, 8, 9, 14, 4])  # some queued, some not, in another order
        images, labels, _ = ahead.take("train", 0, asked)
        expected = dec.chunk("train", 0, asked)
        np.testing.assert_array_equal(images, expected.images)
        np.testing.assert_array_equal(labels, expected.labels)
        assert ahead.pending == {}  # the rest was dropped
        # Queued under another split or epoch: not taken for this one.
        ahead.request("test", 0, np.arange(4))
        ahead.request("train", 1, np.arange(4))
        images, labels, _ = ahead.take("train", 2, np.arange(4))
        np.testing.assert_array_equal(images, dec.chunk("train", 2, np.arange(4)).images)
        images, labels, _ = ahead.take("test", 0, np.arange(4))
        np.testing.assert_array_equal(images, dec.chunk("test", 0, np.arange(4)).images)
        np.testing.assert_array_equal(labels, data.index["test"]["label"][:4])
    finally:
        ahead.close()


def test_without_workers_a_request_queues_nothing(data):
    ahead = ReadAhead(decoder(data), 0)
    ahead.request("train", 0, np.arange(6))
    assert ahead.pending == {} and ahead.pool is None
    images, _, _ = ahead.take("train", 0, np.arange(3))
    np.testing.assert_array_equal(images, decoder(data).chunk("train", 0, np.arange(3)).images)
    ahead.close()


def test_the_slowdown_sleeps_its_share_of_the_time_taken(data, monkeypatch):
    slept = []
    monkeypatch.setattr(readahead.time, "sleep", slept.append)
    dec = decoder(data)
    dec.chunk("train", 0, np.arange(4))
    assert slept == []
    dec.chunk("train", 0, np.arange(4), slowdown=3.0)
    assert len(slept) == 1 and slept[0] > 0
    ahead = ReadAhead(dec, 0)
    ahead.take("train", 0, np.arange(2), slowdown=2.0)
    assert len(slept) == 2


def test_margin_is_the_largest_boundary_move_of_the_last_calls():
    ahead = ReadAhead(None, 0)
    bounds = [(0, 10), (2, 12), (2, 15), (2, 15), (2, 15), (2, 15), (2, 15), (1, 15), (1, 15)]
    # moves:    -       2        3        0        0        0        0        1        0
    margins = [ahead.margin(lo, hi) for lo, hi in bounds]
    assert MOVES_REMEMBERED == 4
    assert margins == [0, 2, 3, 3, 3, 3, 0, 1, 1]
    assert ahead.margin(10, 5) == 10  # both ends move: the larger


@pytest.mark.parametrize("how", ["pixels", "framing"])
@pytest.mark.parametrize("workers", [0, 2])
def test_a_bad_record_stops_with_its_name(damaged, how, workers):
    dataset, rec, damage = damaged
    name = damage(4, how)
    dec = Decoder(dataset, SIZE, resolved(dataset, {}), 5)
    chunk = dec.chunk("train", 0, [3, 4, 5])  # read ahead: the failure waits for its taker
    message = chunk.failed[4]
    assert message.startswith(name) and "stream.on_bad_record: skip" in message, message
    assert "\n" not in message and list(chunk.failed) == [4]
    ahead = ReadAhead(dec, workers)
    try:
        ahead.request("train", 0, np.arange(8))
        ahead.take("train", 0, [5, 6, 7])  # another rank's sample 4 is bad: not this one's
        ahead.request("train", 0, np.arange(8))
        with pytest.raises(BadRecord, match=name):
            ahead.take("train", 0, np.arange(8))
    finally:
        ahead.close()


@pytest.mark.parametrize("how", ["pixels", "framing"])
def test_skip_replaces_a_bad_record_by_the_next_good_one(damaged, how):
    dataset, rec, damage = damaged
    name = damage(4, how)
    dec = Decoder(dataset, SIZE, resolved(dataset, {"on_bad_record": "skip"}), 5)
    chunk = dec.chunk("train", 0, [3, 4, 5])
    nxt = dec.chunk("train", 0, [5])
    np.testing.assert_array_equal(chunk.images[1], nxt.images[0])  # sample 5, as 5 gets it
    assert chunk.labels[1] == nxt.labels[0] == dataset.index["train"]["label"][5]
    assert [p for p, _ in chunk.replaced] == [4]
    assert chunk.replaced[0][1].startswith(name)
    again = dec.chunk("train", 0, [4])
    np.testing.assert_array_equal(again.images[0], chunk.images[1])  # the same on every run
    # The last position wraps to the first; two bad in a row are both passed over.
    last = dataset.train_size - 1
    name_last = damage(last, how)
    wrapped = dec.chunk("train", 0, [last])
    np.testing.assert_array_equal(wrapped.images[0], dec.chunk("train", 0, [0]).images[0])
    assert wrapped.replaced[0][1].startswith(name_last)
    name_5 = damage(5, how)
    twice = dec.chunk("train", 0, [4])
    np.testing.assert_array_equal(twice.images[0], dec.chunk("train", 0, [6]).images[0])
    assert [p for p, _ in twice.replaced] == [4, 4]
    assert twice.replaced[0][1].startswith(f"{name}:")
    assert twice.replaced[1][1].startswith(f"{name_5}:")


def test_a_take_reports_only_the_bad_records_it_takes(damaged):
    dataset, rec, damage = damaged
    name = damage(4)
    ahead = ReadAhead(Decoder(dataset, SIZE, resolved(dataset, {"on_bad_record": "skip"}), 5), 2)
    try:
        ahead.request("train", 0, np.arange(8))
        _, _, replaced = ahead.take("train", 0, np.arange(5, 8))  # 4 decoded, not taken
        assert replaced == []
        ahead.request("train", 0, np.arange(8))
        _, labels, replaced = ahead.take("train", 0, np.arange(2, 6))
        assert len(replaced) == 1 and replaced[0].startswith(name)
        assert labels[2] == dataset.index["train"]["label"][5]
    finally:
        ahead.close()


def test_a_take_of_no_positions_is_empty(data):
    ahead = ReadAhead(decoder(data), 0)
    images, labels, replaced = ahead.take("train", 0, [])
    assert images.shape == (0, *SIZE, 3) and len(labels) == 0 and replaced == []
