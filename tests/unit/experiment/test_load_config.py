"""`dynalloc.experiment.run_config.load_config`: the YAML file read into a mapping, and one
DynallocError naming the file for a missing file, a directory, bad YAML, no mapping or no UTF-8."""

import re

import pytest
from dynalloc.errors import DynallocError
from dynalloc.experiment.run_config import load_config


def write(tmp_path, text, name="run.yaml"):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def test_load_config_reads_a_mapping(tmp_path):
    path = write(tmp_path, "dataset: data\nglobal_batch: 64\npolicy:\n  name: static\n")
    assert load_config(path) == {
        "dataset": "data",
        "global_batch": 64,
        "policy": {"name": "static"},
    }
    assert load_config(str(path)) == load_config(path)


def test_load_config_missing_file(tmp_path):
    path = tmp_path / "nope.yaml"
    with pytest.raises(DynallocError, match=re.escape(str(path))) as caught:
        load_config(path)
    assert "No such file" in str(caught.value)


def test_load_config_on_a_directory(tmp_path):
    with pytest.raises(DynallocError, match=re.escape(str(tmp_path))):
        load_config(tmp_path)


@pytest.mark.parametrize("text", ["a: [1, 2\n", "a: b: c\n", "key: 'unterminated\n", "\tx: 1\n"])
def test_load_config_invalid_yaml(tmp_path, text):
    path = write(tmp_path, text)
    with pytest.raises(DynallocError, match=re.escape(str(path))) as caught:
        load_config(path)
    assert "not valid YAML" in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("text", ["", "# only a comment\n", "- 1\n- 2\n", "42\n", "just text\n"])
def test_load_config_non_mapping(tmp_path, text):
    path = write(tmp_path, text)
    with pytest.raises(DynallocError, match=re.escape(str(path))) as caught:
        load_config(path)
    assert "mapping" in str(caught.value)


def test_load_config_not_utf8(tmp_path):
    path = write(tmp_path, b"dataset: \xff\xfe\n")
    with pytest.raises(DynallocError, match=re.escape(str(path))):
        load_config(path)
