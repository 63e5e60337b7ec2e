"""The base of every settings section: frozen once loaded, and an unknown key is an error (a typo
that would silently change nothing). Feature packages define their own sections on it
(`auth/settings.py`, builtin_sections.py for the built-in plugins); settings.py gathers them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
