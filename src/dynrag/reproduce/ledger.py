"""The claims ledger (``data/claims.json``): every claim of the three papers, one line each, typed
once with where in the paper it is made and which `dynrag reproduce` table can test it. The
results page lists each with its latest verdict from the result records, or "not yet tested"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from dynrag.data import data_path
from dynrag.errors import DataError, json_problem

Paper = Literal["dragin", "deeprag", "bestpractice"]
PAPER_NAMES = {"dragin": "DRAGIN (Su et al., 2024)", "deeprag": "DeepRAG (Guan et al., 2025)",
               "bestpractice": "Searching for best practices in RAG (Wang et al., 2024)"}


class LedgerClaim(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str  # <paper>.<source-slug>.<claim-slug>
    paper: Paper
    source: str  # where in the paper: "Table 2", "Figure 5", "Section 4.2"
    text: str
    table: str | None = None  # the `dynrag reproduce` table that can test it

    @field_validator("id")
    @classmethod
    def _lowercase(cls, value: str) -> str:
        if value != value.lower() or value.count(".") < 2:
            raise ValueError(f"claim id {value!r} is not <paper>.<source>.<claim> in lower case")
        return value


class Ledger(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: Literal[1]
    note: str = ""
    claims: list[LedgerClaim] = Field(default_factory=list)

    def ids(self) -> set[str]:
        return {c.id for c in self.claims}


def ledger_path() -> Path:
    return data_path("claims.json")


def load_ledger(path: str | Path | None = None) -> Ledger:
    """The ledger (the packaged one by default); a bad file is a DataError naming it. A ledger
    not written yet reads as empty, so records can be written and paged before it exists."""
    path = Path(path) if path is not None else ledger_path()
    if not path.is_file():
        return Ledger(version=1)
    try:
        ledger = Ledger.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except ValueError as exc:
        if isinstance(exc, ValidationError):
            error = exc.errors()[0]
            raise DataError(str(path), f"bad claims ledger: {'.'.join(map(str, error['loc']))}: {error['msg']}") from exc
        raise DataError(str(path), f"unreadable claims ledger: {json_problem(exc)}") from exc
    seen: set[str] = set()
    for claim in ledger.claims:
        if claim.id in seen:
            raise DataError(str(path), f"bad claims ledger: claim id {claim.id!r} appears twice")
        seen.add(claim.id)
    return ledger
