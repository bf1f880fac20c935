"""JSON Schema errors an author can act on.

jsonschema reports a `oneOf` that fails as "{...} is not valid under any of the given schemas", and a wrong type
as "'15%' is not of type 'number'". A rule author needs the branch they meant and the operator they typed:
"'lt' needs a number, got '15%' (write 0.15 for 15%)".
"""

from __future__ import annotations

from typing import Any

from jsonschema.exceptions import ValidationError

_WANTS = {"number": "a number", "integer": "a whole number", "boolean": "true or false", "string": "text",
          "array": "a list", "object": "a mapping"}


def most_specific(err: ValidationError) -> ValidationError:
    """For `oneOf`/`anyOf`: the error of the branch the author meant. A branch whose type does not even match the
    value (a scalar test when a mapping was written) was not meant; of the others, the deepest error says most."""
    while err.context:
        meant = [e for e in err.context if not (e.validator == "type" and e.absolute_path == err.absolute_path)]
        if not meant:
            break
        err = max(meant, key=lambda e: len(e.absolute_path))
    return err


def spelling_hint(want: str, got: Any) -> str:
    """How to write `got` as the type wanted, for the usual slips: a percent sign, a unit, quotes, yes/no."""
    if want in ("number", "integer", "int") and isinstance(got, str):
        text = got.strip().replace(",", "").replace("_", "")
        try:
            if text.endswith("%"):
                return f"write {float(text[:-1]) / 100:g} for {got.strip()}"
            return f"write {float(text.lstrip('$')):g} without quotes or units"
        except ValueError:
            return ""
    if want in ("boolean", "bool") and isinstance(got, str) and got.lower() in ("yes", "no", "on", "off", "y", "n"):
        return "write true or false"
    return ""


def readable(err: ValidationError) -> str | None:
    """A wrong type under a named key (an operator, an action argument) as "'lt' needs a number, got '15%'"."""
    path = list(err.absolute_path)
    if err.validator != "type" or not path or not isinstance(path[-1], str):
        return None
    wanted = err.validator_value if isinstance(err.validator_value, list) else [err.validator_value]
    want = " or ".join(_WANTS.get(str(w), str(w)) for w in wanted)
    hint = spelling_hint(str(wanted[0]), err.instance) if len(wanted) == 1 else ""
    return f"'{path[-1]}' needs {want}, got {err.instance!r}" + (f" ({hint})" if hint else "")
