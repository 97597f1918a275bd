"""`experiment.schema_errors`: a config the schema refuses, in one line naming the key."""

from types import SimpleNamespace

from dynalloc.experiment.schema_errors import one_line


def error(validator, value, instance, path=(), schema=None, message="a message"):
    return SimpleNamespace(
        validator=validator,
        validator_value=value,
        instance=instance,
        path=list(path),
        schema=schema or {},
        message=message,
    )


def test_an_unknown_key_is_named_with_the_closest_known_one():
    schema = {"properties": {"training": {}, "grid": {}}}
    refused = error("additionalProperties", False, {"trainig": 1, "grid": 2}, schema=schema)
    assert one_line(refused) == (
        "config: unknown key 'trainig' at the top level (did you mean 'training'?)"
    )


def test_an_unknown_key_far_from_every_known_one_gets_no_guess():
    schema = {"properties": {"lr": {}}}
    refused = error("additionalProperties", False, {"zzz": 1}, ["training"], schema)
    assert one_line(refused) == "config: unknown key 'zzz' in 'training'"


def test_missing_enum_and_type_name_the_key_path():
    assert one_line(error("required", ["grid", "datasets"], {"datasets": {}})) == (
        "config: 'grid' is missing (required)"
    )
    enum = error("enum", ["mnist5k", "digits"], "mnist", ["datasets", "d", "source"])
    assert one_line(enum) == (
        "config key 'datasets.d.source' must be one of mnist5k, digits, got 'mnist' "
        "(did you mean 'mnist5k'?)"
    )
    kind = error("type", "integer", "512", ["training", "global_batch"])
    assert one_line(kind) == (
        "config key 'training.global_batch' must be of type integer, got '512' (str)"
    )


def test_any_other_refusal_is_the_validators_message_on_one_line():
    refused = error("minimum", 1, 0.5, ["scenarios", "s", "slowdown", 1], message="0.5 is\nless")
    assert one_line(refused) == "config key 'scenarios.s.slowdown.1': 0.5 is less"
