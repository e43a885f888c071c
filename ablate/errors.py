"""The one error users see for bad input: it names the key, the value, what is allowed and where."""

from __future__ import annotations

from typing import Any

COMMAND_LINE = "command line"  # the source of a value given on the command line (an option, an override, a path)


class ConfigError(ValueError):
    """A config value that cannot be used.

    Args:
        key: dotted key, e.g. ``model.n_heads``.
        value: the offending value.
        allowed: what would be accepted, in words.
        source: the file (or ``command line``) the value came from, when known.
    """

    def __init__(self, key: str, value: Any, allowed: str, source: str | None = None):
        self.key, self.value, self.allowed, self.source = key, value, allowed, source
        super().__init__(self._message())

    def _message(self) -> str:
        where = f"{self.source}: " if self.source else ""
        return f"{where}{self.key}={self.value!r} is not allowed; expected {self.allowed}"

    def at(self, source: str) -> "ConfigError":
        """The same error, attributed to ``source`` unless it already names one."""
        if self.source is None:
            self.source = source
            self.args = (self._message(),)
        return self


class NoEffect(ConfigError):
    """A key that was set but that the run does not read: a sweep over it would train the same model twice.

    Args:
        key, value, source: as for :class:`ConfigError`.
        why: why the run does not read it, naming the setting that decides.
    """

    def __init__(self, key: str, value: Any, why: str, source: str | None = None):
        super().__init__(key, value, why, source)

    def _message(self) -> str:
        where = f"{self.source}: " if self.source else ""
        return f"{where}{self.key}={self.value!r} has no effect: {self.allowed}"


class UnknownKey(ConfigError):
    """A key the schema does not have: the message names the key, then the keys it could have meant.

    Args:
        key: the dotted key as given, e.g. ``model.n_head``.
        allowed: the keys allowed there, in words.
        source: as for :class:`ConfigError`.
    """

    def __init__(self, key: str, allowed: str, source: str | None = None):
        super().__init__(key, None, allowed, source)

    def _message(self) -> str:
        where = f"{self.source}: " if self.source else ""
        return f"{where}{self.key} is not a key; expected {self.allowed}"


def check_name(name: str, key: str, source: str | None = None) -> str:
    """``name`` when it is a name: a run's or a sweep's folder is made from it under runs/ or sweeps/, so it may not
    be a path (``../x``, ``/tmp/x``) or empty.

    Raises:
        ConfigError: it is not a name.
    """
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\x00" in name:
        raise ConfigError(key, name, "a name, not a path: no '/', no '..', not empty (it names a folder under "
                          "runs/ or sweeps/)", source)
    return name
