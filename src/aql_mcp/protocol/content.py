"""Builders for MCP content blocks and resource contents, as plain wire dicts.

Handlers return these dicts directly: they are what goes on the wire, so no model is built and
dumped again on the hot path (MCP 2025-11-25 schema: ContentBlock, TextResourceContents, ...).
`ToolResult`, a tool's answer, carries them (MCP tools, CallToolResult).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

Content = dict[str, Any]


def text(value: str) -> Content:
    return {"type": "text", "text": value}


def image(data: bytes, mime_type: str) -> Content:
    return {"type": "image", "data": base64.b64encode(data).decode("ascii"), "mimeType": mime_type}


def audio(data: bytes, mime_type: str) -> Content:
    return {"type": "audio", "data": base64.b64encode(data).decode("ascii"), "mimeType": mime_type}


def text_contents(uri: str, value: str, mime_type: str = "text/plain") -> Content:
    return {"uri": uri, "mimeType": mime_type, "text": value}


def blob_contents(uri: str, data: bytes, mime_type: str) -> Content:
    return {"uri": uri, "mimeType": mime_type, "blob": base64.b64encode(data).decode("ascii")}


def embedded(contents: Content) -> Content:
    """An embedded resource content block holding `text_contents` or `blob_contents`."""
    return {"type": "resource", "resource": contents}


def message(role: str, content: Content) -> Content:
    """A prompt message."""
    return {"role": role, "content": content}


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool's answer; `is_error` marks a failure the model can act on (MCP tools, Error Handling)."""

    content: list[Content]
    structured: dict[str, Any] | None = None
    is_error: bool = False

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"content": self.content}
        if self.structured is not None:
            out["structuredContent"] = self.structured
        if self.is_error:
            out["isError"] = True
        return out
