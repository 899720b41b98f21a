"""The shop's pages: routing and HTML for one request against one session.

``handle(catalog, state, method, path, query, form)`` is pure apart from mutating ``state``: the
HTTP server calls it under its lock. Pages are plain, valid HTML with real links and forms
(GET search and filter forms, POST add-to-cart, checkout and booking forms that redirect to a
confirmation page, as real shops do after a POST).
"""

from __future__ import annotations

import html
import math
from typing import NamedTuple
from urllib.parse import urlencode

from trajforge.envs.web.shop.catalog import (  # noqa: F401 - CATEGORY_SPECS, category_spec re-exported
    CATEGORY_SPECS,
    Catalog,
    ClassSession,
    Product,
    WorkshopClass,
    category_spec,
    slug,
)
from trajforge.envs.web.shop.state import (
    MAX_QUANTITY,
    MAX_SEATS,
    SHIPPING,
    SessionState,
    ShopError,
    add_to_cart,
    book,
    cart_count,
    place_order,
    remove_from_cart,
    seats_left,
    stock_left,
)

SHOP_NAME = "Trailhead Outfitters"
PER_PAGE = 10
SORTS: dict[str, str] = {"featured": "Featured", "price_asc": "Price: low to high",
                         "price_desc": "Price: high to low", "rating": "Customer rating"}


class Response(NamedTuple):
    status: int
    body: str = ""
    location: str | None = None
    """Redirect target (status 303)."""


class NotFound(Exception):
    """No page at this path."""


def handle(catalog: Catalog, state: SessionState, method: str, path: str,
           query: dict[str, str], form: dict[str, str]) -> Response:
    """Serve one request. Shop validation errors become 400 pages, unknown paths 404."""
    try:
        return _route(catalog, state, method, path.rstrip("/") or "/", query, form)
    except ShopError as e:
        return Response(400, _error_page(state, "Sorry, that didn't work", str(e)))
    except NotFound:
        return Response(404, _error_page(state, "Page not found",
                                         f"There is no page at {path}."))


def _route(catalog: Catalog, state: SessionState, method: str, path: str,
           query: dict[str, str], form: dict[str, str]) -> Response:
    parts = path.strip("/").split("/") if path != "/" else []
    if method == "POST":
        if tuple(parts) == ("cart", "add"):
            product = add_to_cart(state, catalog, form)
            return Response(303, location=f"/cart?added={product.id}")
        if tuple(parts) == ("cart", "remove"):
            remove_from_cart(state, form)
            return Response(303, location="/cart")
        if tuple(parts) == ("checkout",):
            order = place_order(state, catalog, form)
            return Response(303, location=f"/orders/{order.number}")
        if len(parts) == 3 and parts[0] == "classes" and parts[2] == "book":
            booking = book(state, _workshop(catalog, parts[1]), form)
            return Response(303, location=f"/bookings/{booking.number}")
        raise NotFound
    return Response(200, _get_page(catalog, state, parts, query))


def _get_page(catalog: Catalog, state: SessionState, parts: list[str],
              query: dict[str, str]) -> str:
    match parts:
        case []:
            return _home(catalog, state)
        case ["search"]:
            return _search(catalog, state, query)
        case ["category", name]:
            return _category(catalog, state, name, query)
        case ["product", pid]:
            product = catalog.product(pid)
            if product is None:
                raise NotFound
            return _product(state, product)
        case ["cart"]:
            return _cart(catalog, state, query)
        case ["checkout"]:
            return _checkout(catalog, state)
        case ["orders"]:
            return _orders(state)
        case ["orders", number]:
            return _order(state, number)
        case ["classes"]:
            return _classes(catalog, state)
        case ["classes", cid]:
            return _class_page(state, _workshop(catalog, cid))
        case ["bookings", number]:
            return _booking(catalog, state, number)
    raise NotFound


# ---- pages ------------------------------------------------------------------------------------

def _home(catalog: Catalog, state: SessionState) -> str:
    cats = "".join(f'<li><a href="/category/{slug(c.name)}">{_e(c.name)}</a></li>'
                   for c in catalog.specs)
    body = (f"<h1>{SHOP_NAME}</h1><p>Signed in as {_e(catalog.account.name)}.</p>"
            f"<h2>Shop by category</h2><ul>{cats}</ul>"
            '<h2>Workshops</h2><p><a href="/classes">Book a class</a> in our workshop room.</p>')
    return _layout(state, "Home", body)


def _search(catalog: Catalog, state: SessionState, query: dict[str, str]) -> str:
    q = " ".join(query.get("q", "").split())
    if not q:
        return _layout(state, "Search", "<h1>Search</h1><p>Type what you are looking for in "
                                        "the search box.</p>")
    hits = search_products(catalog, q)
    body = f"<h1>Results for &quot;{_e(q)}&quot;</h1>"
    body += _listing(state, hits, query, "/search")
    return _layout(state, f"Search: {q}", body)


def search_products(catalog: Catalog, q: str) -> list[Product]:
    """Products matching every word of ``q`` (in name, brand, category or color), best first.

    When nothing matches every word, products matching any word come back, most words first,
    so a slightly wrong query still shows something useful.
    """
    words = [w for w in q.lower().replace("-", " ").split() if w]

    def haystack(p: Product) -> set[str]:
        text = f"{p.name} {p.brand} {p.category} {' '.join(p.colors)}"
        tokens = set(text.lower().replace("-", " ").split())
        # Plural-insensitive: "lamps" finds "Lamp", "shoes" finds "Running Shoes".
        return tokens | {t.rstrip("s") for t in tokens}

    scored = []
    for p in catalog.products:
        hay = haystack(p)
        hits = sum(w in hay or w.rstrip("s") in hay for w in words)
        name_hits = sum(w in p.name.lower().split() for w in words)
        if hits:
            scored.append((hits, name_hits, p))
    full = [s for s in scored if s[0] == len(words)]
    pool = full or scored
    pool.sort(key=lambda s: (-s[0], -s[1], s[2].name))
    return [p for _, _, p in pool]


def _category(catalog: Catalog, state: SessionState, name: str, query: dict[str, str]) -> str:
    try:
        spec = catalog.category_spec(name)
    except KeyError:
        raise NotFound from None
    products = catalog.in_category(spec.name)
    brands = sorted({p.brand for p in products})
    chosen = {k: query.get(k, "") for k in ("brand", "color", "size", "max_price", "sort")}
    hits = filter_products(products, chosen)
    selects = _select("brand", [("", "Any brand")] + [(b, b) for b in brands], chosen["brand"],
                      "Brand")
    selects += _select("color", [("", "Any color")] + [(c, c) for c in spec.colors],
                       chosen["color"], "Color")
    if spec.sizes:
        selects += _select("size", [("", "Any size")] + [(s, s) for s in spec.sizes],
                           chosen["size"], "Size")
    selects += (f'<p><label for="max_price">Max price</label> <input type="text" id="max_price" '
                f'name="max_price" value="{_e(chosen["max_price"])}" placeholder="e.g. 50"></p>')
    selects += _select("sort", list(SORTS.items()), chosen["sort"] or "featured", "Sort by")
    form = (f'<form action="/category/{slug(spec.name)}" method="get">{selects}'
            '<button type="submit">Apply filters</button></form>')
    body = f"<h1>{_e(spec.name)}</h1>{form}" + _listing(state, hits, query,
                                                        f"/category/{slug(spec.name)}")
    return _layout(state, spec.name, body)


def filter_products(products: list[Product], chosen: dict[str, str]) -> list[Product]:
    """Apply a category page's filters and sort (raises ShopError on a malformed value)."""
    out = list(products)
    if chosen.get("brand"):
        out = [p for p in out if p.brand == chosen["brand"]]
    if chosen.get("color"):
        out = [p for p in out if chosen["color"] in p.colors]
    if chosen.get("size"):
        out = [p for p in out if chosen["size"] in p.sizes]
    raw = (chosen.get("max_price") or "").strip().lstrip("$")
    if raw:
        try:
            cap = float(raw)
        except ValueError:
            raise ShopError(f"Max price must be a number, not {raw!r}.") from None
        if not math.isfinite(cap):
            raise ShopError("Max price must be a finite number.")
        out = [p for p in out if p.price <= cap]
    sort = chosen.get("sort") or "featured"
    if sort not in SORTS:
        raise ShopError(f"Unknown sort order {sort!r}; choose one of {', '.join(SORTS)}.")
    if sort == "price_asc":
        out.sort(key=lambda p: (p.price, p.name))
    elif sort == "price_desc":
        out.sort(key=lambda p: (-p.price, p.name))
    elif sort == "rating":
        out.sort(key=lambda p: (-p.rating, -p.reviews, p.name))
    return out


def _listing(state: SessionState, hits: list[Product], query: dict[str, str], base: str) -> str:
    if not hits:
        return "<p>No products match.</p>"
    page = _page_number(query, len(hits))
    start = (page - 1) * PER_PAGE
    shown = hits[start:start + PER_PAGE]
    items = "".join(f"<li>{_product_link(p)} {_summary(state, p)}</li>" for p in shown)
    out = (f"<p>Showing {start + 1}-{start + len(shown)} of {len(hits)} products.</p>"
           f'<ul class="results">{items}</ul>')
    nav = []
    if page > 1:
        nav.append(f'<a href="{base}?{_with_page(query, page - 1)}">Previous page</a>')
    if start + PER_PAGE < len(hits):
        nav.append(f'<a href="{base}?{_with_page(query, page + 1)}">Next page</a>')
    return out + (f"<p>{' '.join(nav)}</p>" if nav else "")


def _product(state: SessionState, p: Product) -> str:
    left = stock_left(state, p)
    stock = f"In stock: {left}" if left > 0 else "Out of stock"
    fields = _select("color", [(c, c) for c in p.colors], p.colors[0], "Color")
    if p.sizes:
        fields += _select("size", [(s, s) for s in p.sizes], p.sizes[0], "Size")
    fields += ('<p><label for="quantity">Quantity</label> <input type="number" id="quantity" '
               f'name="quantity" value="1" min="1" max="{MAX_QUANTITY}"></p>')
    body = (f"<h1>{_e(p.name)}</h1>"
            f'<p>Brand: {_e(p.brand)}</p><p>Category: <a href="/category/{slug(p.category)}">'
            f"{_e(p.category)}</a></p>"
            f"<p>Price: {_money(p.price)}</p><p>Rating: {p.rating}/5 ({p.reviews} reviews)</p>"
            f"<p>{stock}</p><p>{_e(p.description)}</p>"
            f'<p>Colors: {", ".join(p.colors)}.'
            + (f' Sizes: {", ".join(p.sizes)}.' if p.sizes else "") + "</p>"
            f'<form action="/cart/add" method="post">'
            f'<input type="hidden" name="product" value="{_e(p.id)}">{fields}'
            '<button type="submit">Add to cart</button></form>')
    return _layout(state, p.name, body)


def _cart(catalog: Catalog, state: SessionState, query: dict[str, str]) -> str:
    body = "<h1>Your cart</h1>"
    added = catalog.product(query.get("added", ""))
    if added is not None:
        body += f'<p class="notice">Added {_e(added.name)} to your cart.</p>'
    if not state.cart:
        return _layout(state, "Cart", body + "<p>Your cart is empty.</p>")
    rows = ""
    for i, line in enumerate(state.cart):
        p = catalog.product(line.product)
        assert p is not None
        rows += (f"<tr><td>{_product_link(p)}</td><td>{_options(line.color, line.size)}</td>"
                 f"<td>qty {line.quantity}</td><td>{_money(p.price * line.quantity)}</td><td>"
                 f'<form action="/cart/remove" method="post"><input type="hidden" name="line" '
                 f'value="{i}"><button type="submit">Remove</button></form></td></tr>')
    body += (f"<table>{rows}</table><p>Subtotal: {_money(_subtotal(catalog, state))}</p>"
             '<p><a href="/checkout">Proceed to checkout</a></p>')
    return _layout(state, "Cart", body)


def _checkout(catalog: Catalog, state: SessionState) -> str:
    if not state.cart:
        return _layout(state, "Checkout", '<h1>Checkout</h1><p>Your cart is empty. '
                                          '<a href="/">Continue shopping</a></p>')
    acct = catalog.account
    items = "".join(f"<li>{_e(_product_name(catalog, c.product))} {_options(c.color, c.size)} "
                    f"qty {c.quantity}</li>" for c in state.cart)
    ship = [(v, f"{label} {_money(cost)}") for v, (label, cost) in SHIPPING.items()]
    fields = (_text_input("full_name", "Full name", acct.name)
              + _text_input("address", "Address", acct.address)
              + _text_input("city", "City", acct.city)
              + _select("shipping", ship, "standard", "Shipping"))
    body = (f"<h1>Checkout</h1><ul>{items}</ul>"
            f"<p>Subtotal: {_money(_subtotal(catalog, state))}</p>"
            f'<form action="/checkout" method="post">{fields}'
            '<button type="submit">Place order</button></form>')
    return _layout(state, "Checkout", body)


def _orders(state: SessionState) -> str:
    if not state.orders:
        return _layout(state, "Orders", "<h1>Your orders</h1><p>No orders yet.</p>")
    items = "".join(f'<li><a href="/orders/{o.number}">Order #{o.number}</a> '
                    f"{_money(o.total)}</li>" for o in state.orders)
    return _layout(state, "Orders", f"<h1>Your orders</h1><ul>{items}</ul>")


def _order(state: SessionState, number: str) -> str:
    order = next((o for o in state.orders if str(o.number) == number), None)
    if order is None:
        raise NotFound
    items = "".join(f"<li>{_e(line.name)} {_options(line.color, line.size)} qty {line.quantity}"
                    f" {_money(line.unit_price * line.quantity)}</li>" for line in order.lines)
    label = SHIPPING[order.shipping][0]
    body = (f"<h1>Order #{order.number} confirmed</h1><ul>{items}</ul>"
            f"<p>Shipping: {label} {_money(order.shipping_cost)}</p>"
            f"<p>Ship to: {_e(order.name)}, {_e(order.address)}, {_e(order.city)}</p>"
            f"<p>Total: {_money(order.total)}</p>")
    return _layout(state, f"Order #{order.number}", body)


def _classes(catalog: Catalog, state: SessionState) -> str:
    items = "".join(f'<li><a href="/classes/{c.id}">{_e(c.name)}</a> '
                    f"{_money(c.price)} per seat</li>" for c in catalog.classes)
    return _layout(state, "Classes", f"<h1>Workshop classes</h1><ul>{items}</ul>")


def _class_page(state: SessionState, c: WorkshopClass) -> str:
    def seats(s: ClassSession) -> str:
        left = seats_left(state, c, s.id)
        return f"{left} seat{'s' if left != 1 else ''} left" if left else "full"

    def option(s: ClassSession) -> tuple[str, str]:
        return s.id, f"{s.label} ({seats(s)})"

    rows = "".join(f"<tr><td>{s.label}</td><td>{seats(s)}</td></tr>" for s in c.sessions)
    fields = (_select("session", [option(s) for s in c.sessions], c.sessions[0].id, "Session")
              + '<p><label for="seats">Seats</label> <input type="number" id="seats" name="seats"'
              f' value="1" min="1" max="{MAX_SEATS}"></p>'
              + _text_input("name", "Name", "") + _text_input("email", "Email", "", kind="email"))
    body = (f"<h1>{_e(c.name)}</h1><p>{_e(c.description)}</p>"
            f"<p>Price: {_money(c.price)} per seat.</p><table>{rows}</table>"
            f'<form action="/classes/{c.id}/book" method="post">{fields}'
            '<button type="submit">Book now</button></form>')
    return _layout(state, c.name, body)


def _booking(catalog: Catalog, state: SessionState, number: str) -> str:
    b = next((b for b in state.bookings if str(b.number) == number), None)
    if b is None:
        raise NotFound
    c = catalog.workshop(b.workshop)
    assert c is not None
    session = next(s for s in c.sessions if s.id == b.session)
    body = (f"<h1>Booking #{b.number} confirmed</h1>"
            f"<p>{b.seats} seat{'s' if b.seats != 1 else ''} in {_e(c.name)} on {session.label}"
            f" for {_e(b.name)} ({_e(b.email)}).</p><p>Total: {_money(b.total)}</p>")
    return _layout(state, f"Booking #{b.number}", body)


def _error_page(state: SessionState, title: str, message: str) -> str:
    return _layout(state, title, f'<h1>{_e(title)}</h1><p class="error">{_e(message)}</p>')


# ---- pieces -----------------------------------------------------------------------------------

def _layout(state: SessionState, title: str, body: str) -> str:
    nav = ('<nav><a href="/">Home</a> <a href="/classes">Classes</a> '
           f'<a href="/cart">Cart ({cart_count(state)})</a> <a href="/orders">Orders</a></nav>'
           '<form action="/search" method="get" role="search">'
           '<input type="search" name="q" placeholder="Search products">'
           '<button type="submit">Search</button></form>')
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f"<title>{_e(title)} | {SHOP_NAME}</title></head>"
            f"<body><header>{nav}</header><main>{body}</main></body></html>")


def _select(name: str, options: list[tuple[str, str]], selected: str, label: str) -> str:
    opts = "".join(f'<option value="{_e(v)}"{" selected" if v == selected else ""}>{_e(t)}'
                   "</option>" for v, t in options)
    return f'<p><label for="{name}">{label}</label> <select id="{name}" name="{name}">{opts}</select></p>'


def _text_input(name: str, label: str, value: str, kind: str = "text") -> str:
    return (f'<p><label for="{name}">{label}</label> <input type="{kind}" id="{name}" '
            f'name="{name}" value="{_e(value)}"></p>')


def _product_link(p: Product) -> str:
    return f'<a href="/product/{p.id}">{_e(p.name)}</a>'


def _summary(state: SessionState, p: Product) -> str:
    stock = "" if stock_left(state, p) > 0 else ", out of stock"
    return f"{_money(p.price)}, {_e(p.brand)}, rated {p.rating} ({p.reviews} reviews){stock}"


def _options(color: str | None, size: str | None) -> str:
    parts = [f"color {color}" if color else "", f"size {size}" if size else ""]
    return ", ".join(p for p in parts if p)


def _product_name(catalog: Catalog, pid: str) -> str:
    p = catalog.product(pid)
    return p.name if p else pid


def _subtotal(catalog: Catalog, state: SessionState) -> float:
    total = 0.0
    for line in state.cart:
        p = catalog.product(line.product)
        total += p.price * line.quantity if p else 0.0
    return round(total, 2)


def _workshop(catalog: Catalog, cid: str) -> WorkshopClass:
    c = catalog.workshop(cid)
    if c is None:
        raise NotFound
    return c


def _page_number(query: dict[str, str], total: int) -> int:
    last = max(1, math.ceil(total / PER_PAGE))
    try:
        page = int(query.get("page", "1"))
    except ValueError:
        raise ShopError(f"page must be a number, not {query.get('page')!r}.") from None
    if not 1 <= page <= last:
        raise ShopError(f"page must be between 1 and {last}.")
    return page


def _with_page(query: dict[str, str], page: int) -> str:
    return urlencode({**{k: v for k, v in query.items() if v}, "page": str(page)})


def _money(x: float) -> str:
    return f"${x:,.2f}"


def _e(text: str) -> str:
    return html.escape(text, quote=True)
