"""The form of `model` and `python_path` in a run config, and the pipeline's `models` table:
checked without MXNet, one DynallocError naming the key."""

import pytest
from dynalloc.errors import DynallocError
from dynalloc.experiment.grid import expand_runs
from dynalloc.experiment.model_spec import BUILTIN_MODELS, check_model, model_label, model_name
from dynalloc.experiment.run_config import resolve


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def fails(raw, *fragments):
    with pytest.raises(DynallocError) as caught:
        resolve({"dataset": "staged", **raw}, 2)
    message = str(caught.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


GOOD = [
    "lenet",
    "anything",  # a string's name is checked when the network is built
    {"zoo": "resnet18_v1"},
    {"zoo": "mobilenet0.25", "args": {"multiplier": 0.5}},
    {"zoo": "resnet18_v1", "args": None},
    {"factory": "mynets:small"},
    {"factory": "my_pkg.sub.nets:build_it", "args": {"width": 3}},
]


@pytest.mark.parametrize("spec", GOOD, ids=str)
def test_good_model_forms_resolve_unchanged(spec):
    config = resolve({"dataset": "staged", "model": spec}, 2)
    assert config["model"] == spec


@pytest.mark.parametrize(
    ("spec", "fragments"),
    [
        ("", ["'model'", "zoo", "factory"]),
        (3, ["'model'", "mlp, lenet, resnet", "got 3"]),
        (["lenet"], ["'model'"]),
        ({}, ["'model'", "exactly one of zoo and factory"]),
        ({"zoo": "a", "factory": "b:c"}, ["exactly one of zoo and factory"]),
        ({"args": {"x": 1}}, ["exactly one of zoo and factory"]),
        ({"zoo": "resnet18_v1", "weights": "x"}, ["'model.weights'", "zoo, factory, args"]),
        ({"zoo": ""}, ["'model.zoo'", "model_zoo"]),
        ({"zoo": 18}, ["'model.zoo'"]),
        ({"factory": "mynets"}, ["'model.factory'", "package.module:function"]),
        ({"factory": "mynets:"}, ["'model.factory'"]),
        ({"factory": "my nets:f"}, ["'model.factory'"]),
        ({"factory": "a.b:c:d"}, ["'model.factory'"]),
        ({"factory": "a..b:c"}, ["'model.factory'"]),
        ({"factory": 3}, ["'model.factory'"]),
        ({"zoo": "resnet18_v1", "args": [1]}, ["'model.args'", "[1]"]),
        ({"zoo": "resnet18_v1", "args": {1: 2}}, ["'model.args'"]),
    ],
)
def test_bad_model_forms_are_named(spec, fragments):
    fails({"model": spec}, *fragments)


def test_model_names_for_labels():
    assert model_name("lenet") == "lenet"
    assert model_name({"zoo": "resnet18_v1", "args": {"classes": 3}}) == "resnet18_v1"
    assert model_name({"factory": "pkg.nets:small"}) == "pkg.nets:small"
    config = resolve({"dataset": "staged", "model": {"zoo": "resnet18_v1"}}, 2)
    assert model_label(config) == "resnet18_v1"
    config["labels"]["model"] = "resnet-thumb"
    assert model_label(config) == "resnet-thumb"


def test_python_path_defaults_to_none_and_is_made_absolute(tmp_path):
    assert resolve({"dataset": "staged"}, 2)["python_path"] == []
    (tmp_path / "nets").mkdir()
    (tmp_path / "more").mkdir()
    config = resolve({"dataset": "staged", "python_path": ["nets", str(tmp_path / "more")]}, 2)
    assert config["python_path"] == [str(tmp_path.resolve() / "nets"), str(tmp_path / "more")]
    assert resolve(config, 2) == config  # a resolved config resolves again


@pytest.mark.parametrize(
    ("value", "fragments"),
    [
        ("nets", ["'python_path'", "list of directories"]),
        ([3], ["'python_path'", "list of directories"]),
        ([""], ["'python_path'"]),
        (["missing"], ["'python_path'", "'missing'", "not a directory"]),
        (["a-file"], ["'python_path'", "'a-file'", "not a directory"]),
    ],
)
def test_bad_python_path_is_named(tmp_path, value, fragments):
    (tmp_path / "a-file").write_text("")
    fails({"python_path": value}, *fragments)


def pipeline(**overrides):
    config = {
        "results": "out",
        "datasets": {"digits": {"source": "digits"}},
        "scenarios": {"flat": {}},
        "policies": {"static": {}},
        "models": {
            "thumb": {"zoo": "resnet18_v1", "args": {"thumbnail": True}},
            "mine": {"factory": "mynets:small", "args": {"width": 8}},
        },
        "grid": {
            "dataset": ["digits"],
            "model": ["mlp", "thumb", "mine"],
            "policy": ["static"],
            "scenario": ["flat"],
            "ranks": [2],
            "seed": [0],
        },
        "training": {"global_batch": 64, "epochs": 1},
    }
    config.update(overrides)
    return config


def test_grid_models_name_built_ins_and_models_entries():
    runs = expand_runs(pipeline(), config_dirs=["/configs", "/configs", "/more"])
    assert sorted(runs) == [f"digits-{m}-static-flat-r2-s0" for m in ("mine", "mlp", "thumb")]
    thumb = runs["digits-thumb-static-flat-r2-s0"]["config"]
    assert thumb["model"] == {"zoo": "resnet18_v1", "args": {"thumbnail": True}}
    assert thumb["labels"]["model"] == "thumb"
    assert model_label({**thumb, "labels": thumb["labels"]}) == "thumb"
    mine = runs["digits-mine-static-flat-r2-s0"]["config"]
    assert mine["model"] == {"factory": "mynets:small", "args": {"width": 8}}
    mlp = runs["digits-mlp-static-flat-r2-s0"]["config"]
    assert mlp["model"] == "mlp" and "model" not in mlp["labels"]
    for run in runs.values():  # only a factory imports: another config file reruns no other run
        factory = run["axes"]["model"] == "mine"
        assert run["config"].get("python_path") == (["/configs", "/more"] if factory else None)
        assert run["axes"]["model"] in ("mlp", "thumb", "mine")


def test_python_path_of_the_pipeline_comes_first_then_the_config_directories():
    config = pipeline(python_path=["nets", "shared"])
    config["training"]["python_path"] = ["shared", "extra"]
    runs = expand_runs(config, config_dirs=["/configs"])
    mine = runs["digits-mine-static-flat-r2-s0"]["config"]
    assert mine["python_path"] == ["nets", "shared", "extra", "/configs"]
    for run in runs.values():
        resolved = resolve({**run["config"], "python_path": []}, 2)  # a run config resolves
        assert resolved["model"] == run["config"]["model"]
    assert "python_path" not in next(iter(expand_runs(pipeline()).values()))["config"]


@pytest.mark.parametrize(
    ("change", "fragments"),
    [
        (
            {"grid": {**pipeline()["grid"], "model": ["mlp", "vgg"]}},
            ["grid.model", "'vgg'", "mlp, lenet, resnet", "thumb, mine"],
        ),
        ({"models": {"lenet": {"zoo": "resnet18_v1"}}}, ["models.lenet", "built-in"]),
        ({"models": {"thumb": "resnet18_v1"}}, ["models.thumb", "zoo"]),
        ({"models": {"thumb": {"zoo": "x", "factory": "a:b"}}}, ["models.thumb", "exactly one"]),
        ({"models": {"thumb": {"factory": "nocolon"}}}, ["'models.thumb.factory'"]),
        ({"models": {"thumb": {"zoo": "x", "arg": {}}}}, ["'models.thumb.arg'"]),
        ({"models": ["thumb"]}, ["models must map names"]),
        ({"python_path": "nets"}, ["python_path", "list of directories"]),
    ],
)
def test_models_mistakes_are_named(change, fragments):
    config = pipeline(**change)
    if "models" in change:
        config["grid"]["model"] = ["mlp"]
    with pytest.raises(DynallocError) as caught:
        expand_runs(config)
    message = str(caught.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_an_undefined_model_in_the_grid_is_named_even_without_models():
    config = pipeline()
    del config["models"]
    config["grid"]["model"] = ["lenet", "mine"]
    with pytest.raises(DynallocError, match=r"grid.model names 'mine'.*\(defined: none\)"):
        expand_runs(config)
    config["grid"]["model"] = list(BUILTIN_MODELS)
    assert len(expand_runs(config)) == 3


def test_check_model_names_the_key_it_is_given():
    check_model({"zoo": "resnet18_v1"}, "models.thumb")
    with pytest.raises(DynallocError, match=r"^config key 'models\.thumb\.factory' must look"):
        check_model({"factory": "nocolon"}, "models.thumb")
