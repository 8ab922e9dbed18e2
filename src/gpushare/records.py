"""Plain record classes for what every grade imports: ``dataclasses`` costs too much there.

``import dataclasses`` pulls in ``inspect`` (with ``ast``, ``dis``, ``tokenize``...), and each
``@dataclass`` compiles its methods with ``exec`` when the class is created: together some
30 ms of a grade that has half a second. A record here declares ``__slots__`` and a typed
``__init__``; :class:`Record` adds equality and a readable repr from the slots.
"""

from __future__ import annotations


class Record:
    """Equality and ``repr`` from ``__slots__``; subclasses write their own ``__init__``."""

    __slots__ = ()

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._values() == other._values()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  # mutable, like a non-frozen dataclass

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({fields})"
