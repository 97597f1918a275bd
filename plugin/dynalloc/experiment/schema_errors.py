"""A config that its JSON schema refuses, said in one line that names the key.

Snakemake's `validate()` reports a schema error with the whole schema and the whole config
(hundreds of lines, the useful one fifth); the pipeline instead says which key is wrong and how,
as `dynalloc`'s own commands do, e.g. `config: unknown key 'trainig' at the top level (did you
mean 'training'?)`. The error is read by its fields (jsonschema's ValidationError: `path`,
`validator`, `validator_value`, `instance`, `schema`, `message`), so nothing here imports
jsonschema.
"""

import difflib


def one_line(error):
    """The one line that says what `error` (a jsonschema ValidationError) refuses."""
    where = ".".join(str(part) for part in error.path)
    key = f"config key '{where}'" if where else "config"
    kind, expected, value = error.validator, error.validator_value, error.instance
    if kind == "additionalProperties" and isinstance(value, dict):
        known = list(error.schema.get("properties", {}))
        unknown = sorted(str(k) for k in value if k not in known)
        if unknown:
            place = f"in '{where}'" if where else "at the top level"
            return f"config: unknown key '{unknown[0]}' {place}{_close(unknown[0], known)}"
    if kind == "required" and isinstance(value, dict):
        missing = [name for name in expected if name not in value]
        if missing:
            return f"{key}: '{missing[0]}' is missing (required)"
    if kind == "enum":
        choices = ", ".join(map(str, expected))
        hint = _close(str(value), [str(c) for c in expected])
        return f"{key} must be one of {choices}, got {value!r}{hint}"
    if kind == "type":
        return f"{key} must be of type {expected}, got {value!r} ({type(value).__name__})"
    return f"{key}: {' '.join(error.message.split())}"


def _close(word, known):
    """' (did you mean ...?)' for the known name closest to `word`, if any is close."""
    close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""
