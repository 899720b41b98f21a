"""The web shop's realistic mistakes for self-repair demonstrations (``EnvSpec.mistakes``).

The shop keeps a session (page, cart, form), so only mistakes that change nothing are offered:

- ``wrong_entity``: a click on a misspelt product name: ``no link called ...``, with the page's
  links listed;
- ``bad_url``: opening a guessed product URL that is not one of the shop's pages;
- ``intermediate``: ``find`` for the product on the page before searching for it: a real answer
  (no such line yet) that is not progress.
"""

from __future__ import annotations

from collections.abc import Sequence

from trajforge.envs.mistakes import first_call
from trajforge.schema import Mistake, Task, ToolCall


def _misspelt(name: str) -> str:
    """The name with the second letter of its last word dropped (``Headphones`` → ``Hadphones``):
    no longer a substring of the real label, which click() would accept."""
    words = name.split()
    last = words[-1]
    words[-1] = last[0] + last[2:] if len(last) > 3 else last + "x"
    return " ".join(words)


def web_mistakes(task: Task, pool: Sequence[Task]) -> list[Mistake]:
    out: list[Mistake] = []
    product = task.entities.get("product")
    click = next((i for i, c in enumerate(task.reference)
                  if c.name == "click" and isinstance(product, str) and c.arguments.get("element") == product), None)
    if click is not None:
        wrong = _misspelt(product)
        out.append(Mistake(kind="wrong_entity", at=click, calls=(ToolCall(name="click", arguments={"element": wrong}),),
                           recovery=f"There is no link {wrong!r}; the page lists {product!r}, the product asked for."))
    at = first_call(task, ("open",))
    if at is not None and isinstance(product, str):
        slug = "-".join(product.lower().split())
        out.append(Mistake(kind="bad_url", at=at, calls=(ToolCall(name="open", arguments={"url": f"/products/{slug}"}),),
                           recovery="That is not one of the shop's pages; I'll start from the home page and search."))
    search = first_call(task, ("type",))
    if search is not None and search > 0 and isinstance(product, str) \
            and task.reference[search].arguments.get("field") == "q":
        out.append(Mistake(kind="intermediate", at=search, calls=(ToolCall(name="find", arguments={"text": product}),),
                           recovery="The product is not on this page yet; I'll search for it."))
    return out
