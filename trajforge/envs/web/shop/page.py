"""HTML → a compact text view with numbered elements (like WebShop / BrowserGym page text).

``parse_page(html, url)`` reads a page with the stdlib ``HTMLParser`` into a ``Page``: text lines
in document order, where every link, text field, dropdown and button is an ``Element`` numbered
from 1, plus the page's forms (action, method, hidden inputs, fields, buttons). ``Page.lines``
renders those lines with the field values the agent has typed so far::

    [1] link "Home" [2] link "Classes" [3] link "Cart (0)" [4] link "Orders"
    [5] textbox "q" (Search products) [6] button "Search"
    # Northpeak Aero Runner
    Color [7] select "color" = "black" (options: black, red)
    Quantity [8] textbox "quantity" = "1"
    [9] button "Add to cart"

Supported: a, input (text-like, number, email, search, hidden, submit), select/option,
textarea, button, label[for], headings, lists, tables, and ``class="error"`` messages (collected
in ``Page.errors``). Checkboxes and radio buttons are not (the shop has none).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Literal

from pydantic import BaseModel, Field

ElementKind = Literal["link", "textbox", "select", "button"]

# <form> is not a block: a form inside a table cell (a cart line's Remove button) stays on its row.
_BLOCKS = {"p", "div", "ul", "ol", "table", "tr", "section", "header", "nav", "footer",
           "main", "article", "br", "hr", "fieldset", "dl", "dt", "dd", "blockquote", "pre"}
_SKIP = {"script", "style", "template", "noscript", "head"}
_TEXT_INPUTS = {"", "text", "search", "number", "email", "tel", "url", "password", "date"}
_MARK = re.compile(r"\x00(\d+)\x00")


class Element(BaseModel):
    """One thing on the page the agent can click or fill."""

    id: int
    kind: ElementKind
    label: str = ""
    """Link text, button text, or the ``<label>`` of a field."""
    name: str = ""
    """Form field name (fields and named buttons)."""
    value: str = ""
    """Initial value: a field's value attribute, a select's selected option, a button's value."""
    options: list[tuple[str, str]] = Field(default_factory=list)
    """(value, text) pairs of a select."""
    href: str | None = None
    form: int | None = None
    """Index into ``Page.forms`` of the form this element belongs to."""
    placeholder: str = ""
    html_id: str = ""

    def option_text(self, value: str) -> str:
        return next((t for v, t in self.options if v == value), value)


class Form(BaseModel):
    index: int
    action: str
    method: Literal["get", "post"]
    hidden: list[tuple[str, str]] = Field(default_factory=list)
    fields: list[int] = Field(default_factory=list)
    """Element ids of the form's textboxes and selects, in order."""
    buttons: list[int] = Field(default_factory=list)


class Page(BaseModel):
    """One loaded page: its text lines (with element markers), elements and forms."""

    url: str
    """Path and query, e.g. ``/search?q=lamp``."""
    title: str = ""
    raw_lines: list[str] = Field(default_factory=list)
    """Lines with ``\\x00<id>\\x00`` where an element is rendered."""
    elements: list[Element] = Field(default_factory=list)
    forms: list[Form] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)

    def element(self, eid: int) -> Element | None:
        return self.elements[eid - 1] if 1 <= eid <= len(self.elements) else None

    def lines(self, values: dict[int, str] | None = None) -> list[str]:
        """The page text with each element rendered (typed ``values`` override the initial)."""
        values = values or {}
        return [_MARK.sub(lambda m: self._render(int(m.group(1)), values), line)
                for line in self.raw_lines]

    def _render(self, eid: int, values: dict[int, str]) -> str:
        el = self.elements[eid - 1]
        if el.kind in ("link", "button"):
            return f'[{eid}] {el.kind} "{el.label}"'
        value = values.get(eid, el.value)
        if el.kind == "select":
            opts = ", ".join(text for _, text in el.options)
            return f'[{eid}] select "{el.name}" = "{el.option_text(value)}" (options: {opts})'
        out = f'[{eid}] textbox "{el.name}"'
        if value:
            out += f' = "{value}"'
        if el.placeholder and not value:
            out += f" ({el.placeholder})"
        return out


def parse_page(html: str, url: str) -> Page:
    parser = _PageParser()
    # NUL marks where an element is rendered (``_MARK``), so none may come from the page itself (a
    # search for "%00" + "7" + "%00" would otherwise render element 7 there); HTML reads a NUL as
    # U+FFFD anyway.
    parser.feed(html.replace("\x00", "\ufffd"))
    parser.close()
    return parser.finish(url)


class _PageParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self.line: list[str] = []
        self.elements: list[Element] = []
        self.forms: list[Form] = []
        self.errors: list[str] = []
        self.title = ""
        self.form: int | None = None
        self.skip = 0
        self.capture: list[str] | None = None  # text of the open a/button/option/textarea/title
        self.pending: dict | None = None  # the element being captured
        self.select: Element | None = None
        self.option: tuple[str | None, bool] | None = None
        self.labels: dict[str, str] = {}
        self.label_for: str | None = None
        self.label_text: list[str] = []
        self.error_tag: str | None = None  # tag of the open class="error" element
        self.error_nest = 0
        self.error_text: list[str] = []
        self.in_row_cells = 0

    # ---- structure ------------------------------------------------------------------------

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag in _SKIP:
            self.skip += 1
            return
        if tag == "title":
            self.capture, self.pending = [], {"tag": "title"}
            return
        if self.skip:
            return
        if self.error_tag == tag:
            self.error_nest += 1
        elif self.error_tag is None and "error" in a.get("class", "").split():
            self.error_tag, self.error_nest, self.error_text = tag, 1, []
        if tag in _BLOCKS:
            self.flush()
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            self.flush()
            self.line.append("#" * int(tag[1]) + " ")
        elif tag == "li":
            self.flush()
            self.line.append("- ")
        elif tag in ("td", "th"):
            if self.in_row_cells:
                self.line.append(" | ")
            self.in_row_cells += 1
        elif tag == "tr":
            self.in_row_cells = 0
        elif tag == "form":
            method = a.get("method", "get").lower()
            self.forms.append(Form(index=len(self.forms), action=a.get("action", ""),
                                   method="post" if method == "post" else "get"))
            self.form = len(self.forms) - 1
        elif tag == "label":
            self.label_for, self.label_text = a.get("for"), []
        elif tag == "a":
            self.capture, self.pending = [], {"kind": "link", "href": a.get("href")}
        elif tag == "button":
            self.capture, self.pending = [], {"kind": "button", "name": a.get("name", ""),
                                              "value": a.get("value", ""),
                                              "type": a.get("type", "submit").lower()}
        elif tag == "input":
            self._input(a)
        elif tag == "select":
            self.select = Element(id=0, kind="select", name=a.get("name", ""),
                                  html_id=a.get("id", ""))
        elif tag == "option" and self.select is not None:
            self.capture = []
            self.option = (a.get("value"), "selected" in a)
        elif tag == "textarea":
            self.capture, self.pending = [], {"kind": "textarea", "name": a.get("name", ""),
                                              "html_id": a.get("id", "")}

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP:
            self.skip = max(0, self.skip - 1)
            return
        if tag == "title" and self.pending and self.pending.get("tag") == "title":
            self.title = _squash("".join(self.capture or []))
            self.capture = self.pending = None
            return
        if self.skip:
            return
        if tag == "a" and self.pending and self.pending["kind"] == "link":
            text = _squash("".join(self.capture or [])) or (self.pending["href"] or "link")
            self._add(Element(id=0, kind="link", label=text, href=self.pending["href"]))
            self.capture = self.pending = None
        elif tag == "button" and self.pending and self.pending["kind"] == "button":
            p = self.pending
            text = _squash("".join(self.capture or [])) or p["value"] or "Submit"
            self.capture, self.pending = None, None
            el = Element(id=0, kind="button", label=text, name=p["name"], value=p["value"])
            self._add(el, submits=p["type"] == "submit")
        elif tag == "option" and self.select is not None and self.option is not None:
            text = _squash("".join(self.capture or []))
            value, selected = self.option
            self.select.options.append((text if value is None else value, text))
            if selected:
                self.select.value = self.select.options[-1][0]
            self.capture, self.option = None, None
        elif tag == "select" and self.select is not None:
            el, self.select = self.select, None
            if not el.value and el.options:
                el.value = el.options[0][0]
            self._add(el)
        elif tag == "textarea" and self.pending and self.pending["kind"] == "textarea":
            p = self.pending
            value = "".join(self.capture or []).strip()
            self.capture = self.pending = None
            self._add(Element(id=0, kind="textbox", name=p["name"], value=value,
                              html_id=p["html_id"]))
        elif tag == "label":
            if self.label_for:
                self.labels[self.label_for] = _squash("".join(self.label_text))
            self.label_for = None
        elif tag == "form":
            self.form = None
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6", "li") or tag in _BLOCKS:
            self.flush()
        if tag == self.error_tag:
            self.error_nest -= 1
            if not self.error_nest:
                self.error_tag = None
                if _squash("".join(self.error_text)):
                    self.errors.append(_squash("".join(self.error_text)))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in ("input", "br", "hr", "img", "meta", "link"):
            self.handle_endtag(tag)

    def handle_data(self, data: str) -> None:
        if self.capture is not None:
            self.capture.append(data)
            if self.pending and self.pending.get("tag") == "title":
                return
        if self.skip:
            return
        if self.label_for is not None:
            self.label_text.append(data)
        if self.error_tag is not None:
            self.error_text.append(data)
        if self.capture is None:
            self.line.append(data)

    # ---- elements -------------------------------------------------------------------------

    def _input(self, a: dict[str, str]) -> None:
        kind = a.get("type", "text").lower()
        if kind == "hidden":
            if self.form is not None:
                self.forms[self.form].hidden.append((a.get("name", ""), a.get("value", "")))
        elif kind in ("submit", "button", "image"):
            self._add(Element(id=0, kind="button", label=a.get("value") or "Submit",
                              name=a.get("name", ""), value=a.get("value", "")),
                      submits=kind != "button")
        elif kind in _TEXT_INPUTS:
            self._add(Element(id=0, kind="textbox", name=a.get("name", ""),
                              value=a.get("value", ""), placeholder=a.get("placeholder", ""),
                              html_id=a.get("id", "")))

    def _add(self, el: Element, submits: bool = True) -> None:
        el.id = len(self.elements) + 1
        el.form = self.form if (el.kind != "link" and submits) else None
        self.elements.append(el)
        if el.form is not None:
            form = self.forms[el.form]
            (form.buttons if el.kind == "button" else form.fields).append(el.id)
        self.line.append(f" \x00{el.id}\x00 ")

    def flush(self) -> None:
        text = _squash("".join(self.line))
        if text and text not in ("-", "#", "##", "###", "|"):
            self.lines.append(text)
        self.line = []

    def finish(self, url: str) -> Page:
        self.flush()
        for el in self.elements:
            if el.html_id and el.html_id in self.labels:
                el.label = self.labels[el.html_id]
        return Page(url=url, title=self.title, raw_lines=self.lines, elements=self.elements,
                    forms=self.forms, errors=self.errors)


def _squash(text: str) -> str:
    return " ".join(text.split())
