"""`JsonConfig`: what the configuration dataclasses share (`TransformerConfig`, `DataConfig`,
`TrainingConfig`): the JSON round trip, and validation helpers whose errors name the field."""
import dataclasses
import json
import math
import numbers
from pathlib import Path


class JsonConfig:
    """A frozen dataclass saved as JSON. Subclasses define `validate()`, run on construction."""

    def __post_init__(self):
        self.validate()

    def validate(self):
        raise NotImplementedError

    def to_json(self):
        return json.dumps(dataclasses.asdict(self), indent=2)

    @classmethod
    def from_json(cls, text):
        """The config written by `to_json`. Unknown keys, and missing keys of fields without a
        default, are a ValueError naming them."""
        values = json.loads(text)
        if not isinstance(values, dict):
            raise ValueError(f"{cls.__name__}: a config must be a JSON object, got {type(values).__name__}")
        fields = {field.name: field for field in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise ValueError(f"{cls.__name__}: unknown keys {unknown}; the fields are {list(fields)}")
        missing = [name for name, field in fields.items() if name not in values
                   and field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING]
        if missing:
            raise ValueError(f"{cls.__name__}: missing keys {missing}")
        return cls(**values)

    def save(self, path):
        Path(path).write_text(self.to_json() + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path):
        return cls.from_json(Path(path).read_text(encoding="utf-8"))

    def fail(self, message):
        raise ValueError(f"{type(self).__name__}: {message}")

    def check(self, name, holds, requirement, optional=False):
        """A ValueError naming `name` unless its value is a finite number for which `holds` is
        true (None is allowed when `optional`)."""
        value = getattr(self, name)
        if optional and value is None:
            return
        if not (is_number(value) and math.isfinite(value) and holds(value)):
            self.fail(f"{name} must be {requirement}, got {value!r}")

    def check_integer(self, name, low, optional=False):
        value = getattr(self, name)
        if optional and value is None:
            return
        if not is_integer(value) or value < low:
            requirement = "a positive integer" if low == 1 else f"an integer ≥ {low}"
            self.fail(f"{name} must be {requirement}, got {value!r}")

    def check_choice(self, name, allowed):
        if getattr(self, name) not in allowed:
            self.fail(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")

    def check_flag(self, name):
        if not isinstance(getattr(self, name), bool):
            self.fail(f"{name} must be true or false, got {getattr(self, name)!r}")


def is_integer(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)
