"""Reading what the report produced: PNG sizes, and HTML parsed into tags and table cells."""

from __future__ import annotations

import struct
from html.parser import HTMLParser

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int]:
    """(width, height) from the IHDR chunk, which the PNG format puts first."""
    assert data[:8] == PNG_SIGNATURE, "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


class ParsedPage(HTMLParser):
    """Start tags (name, attributes), ids, and the text of every <td>/<th> by class."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.ids: set[str] = set()
        self.cells: list[tuple[str, str]] = []  # (class, text)
        self.script_text: list[str] = []
        self._cell: list[str] | None = None
        self._cell_class = ""
        self._in_script = False
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if attributes.get("id"):
            self.ids.add(attributes["id"])
        if tag in ("td", "th"):
            self._cell, self._cell_class = [], attributes.get("class") or ""
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.cells.append((self._cell_class, "".join(self._cell).strip()))
            self._cell = None
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._in_script:
            self.script_text.append(data)

    def cell_texts(self, css_class: str) -> list[str]:
        return [text for cls, text in self.cells if css_class in cls.split()]
