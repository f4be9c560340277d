"""The Passage record every reader yields and every index stores."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Passage:
    id: str
    title: str
    text: str

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "title": self.title, "text": self.text}
