"""A pipeline config that cannot run is refused when the DAG is built, before any job starts,
with one line naming the key (and the closest known key, where it is a typo)."""

import pytest
import yaml
from helpers import SNAKEMAKE, TINY, snakemake

pytestmark = pytest.mark.skipif(not SNAKEMAKE.exists(), reason="make setup builds .venv-workflow")


def bad(tmp_path, override):
    """snakemake's output for the tiny config with `override` merged over it; the message is
    one line, without the schema or the config around it."""
    results = tmp_path / "results"
    result = snakemake("-n", results=results, override=override)
    assert result.returncode != 0
    assert not results.exists(), "a job started"
    text = result.stdout + result.stderr
    assert "Failed validating" not in text and "$schema" not in text
    assert len(text.splitlines()) < 8, text
    return text


def test_unknown_dataset_source_is_refused(tmp_path):
    text = bad(tmp_path, {"datasets": {"digits": {"source": "imagenet"}}})
    assert "imagenet" in text and "source" in text


def test_ranks_below_one_is_refused(tmp_path):
    grid = yaml.safe_load(TINY.read_text())["grid"]
    text = bad(tmp_path, {"grid": {**grid, "ranks": [0]}})
    assert "ranks" in text and "minimum" in text


def test_grid_that_expands_to_no_run_is_refused(tmp_path):
    grid = yaml.safe_load(TINY.read_text())["grid"]
    text = bad(tmp_path, {"grid": {**grid, "dataset": []}})
    assert "dataset" in text


def test_scenario_naming_a_missing_rank_is_refused(tmp_path):
    text = bad(tmp_path, {"scenarios": {"slowdown-1-3": {"slowdown": {5: 3}}}})
    assert "scenarios.slowdown-1-3.slowdown names rank 5" in text


def test_missing_training_interpreter_is_refused(tmp_path):
    text = bad(tmp_path, {"train_python": "/nonexistent/python"})
    assert "train_python /nonexistent/python is not an executable interpreter" in text


def test_a_typo_in_a_top_level_key_names_it_and_the_key_meant(tmp_path):
    training = yaml.safe_load(TINY.read_text())["training"]
    text = bad(tmp_path, {"trainig": training})
    assert "config: unknown key 'trainig' at the top level (did you mean 'training'?)" in text


def test_a_typo_in_a_nested_key_names_where(tmp_path):
    text = bad(tmp_path, {"training": {"optimzer": {"name": "sgd"}}})
    assert "config: unknown key 'optimzer' in 'training' (did you mean 'optimizer'?)" in text


def test_a_value_of_the_wrong_type_names_the_key(tmp_path):
    text = bad(tmp_path, {"training": {"global_batch": "512"}})
    assert "config key 'training.global_batch' must be of type integer, got '512'" in text


def test_a_dataset_that_reads_files_needs_a_path(tmp_path):
    text = bad(tmp_path, {"datasets": {"fm": {"source": "idx"}}})
    assert "config key 'datasets.fm': 'path' is missing (required)" in text


def test_a_missing_dataset_path_is_found_when_the_dag_is_built(tmp_path):
    missing = tmp_path / "no-such-folder"
    text = bad(tmp_path, {"datasets": {"digits": {"source": "idx", "path": str(missing)}}})
    assert f"config: datasets.digits.path: {missing} does not exist" in text


@pytest.mark.parametrize(
    ("elastic", "message"),
    [
        (
            {"max_restarts": -1},
            "config key 'training.elastic.max_restarts': -1 is less than the minimum of 0",
        ),
        ({"min_ranks": 9}, "config key 'training.elastic.min_ranks' is 9, but the run has"),
    ],
)
def test_a_bad_elastic_section_is_refused_when_the_dag_is_built(tmp_path, elastic, message):
    text = bad(tmp_path, {"training": {"elastic": elastic}})
    assert message in text, text
