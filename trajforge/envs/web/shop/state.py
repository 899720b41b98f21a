"""Per-session shop state (cart, orders, bookings) and the actions that change it.

The actions validate like a real shop backend and raise ``ShopError`` with the message the site
shows the shopper ("only 3 left in stock"); the site turns that into an HTTP 400 page. State is
plain pydantic data, so a session is snapshotted with ``model_dump`` and restored with
``model_validate``, exactly.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from trajforge.envs.web.shop.catalog import Catalog, Product, WorkshopClass

SHIPPING: dict[str, tuple[str, float]] = {
    "standard": ("Standard (3-5 days)", 4.99),
    "express": ("Express (next day)", 14.99),
    "pickup": ("Store pickup", 0.0),
}
"""value -> (label, cost)."""
MAX_QUANTITY = 10
MAX_SEATS = 8
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[A-Za-z]{2,}")


class ShopError(Exception):
    """A request the shop refuses; the message is shown on the error page."""


class CartLine(BaseModel):
    product: str
    """Product id."""
    color: str | None = None
    size: str | None = None
    quantity: int


class OrderLine(CartLine):
    name: str
    unit_price: float


class Order(BaseModel):
    number: int
    lines: list[OrderLine]
    shipping: str
    """Shipping option value (``standard``, ``express``, ``pickup``)."""
    name: str
    address: str
    city: str
    subtotal: float
    shipping_cost: float
    total: float


class Booking(BaseModel):
    number: int
    workshop: str
    """Class id."""
    session: str
    """Session id, ``2025-06-14T10:00``."""
    seats: int
    name: str
    email: str
    total: float


class SessionState(BaseModel):
    """Everything one shopper's visit changed; the catalog itself is immutable."""

    seed: int
    """Which catalog this session shops in."""
    world: int = 0
    """Which world that catalog is of (``worlds.py``)."""
    cart: list[CartLine] = Field(default_factory=list)
    orders: list[Order] = Field(default_factory=list)
    bookings: list[Booking] = Field(default_factory=list)
    sold: dict[str, int] = Field(default_factory=dict)
    """Units ordered per product in this session (stock shown = catalog stock - sold)."""
    booked: dict[str, int] = Field(default_factory=dict)
    """Seats booked per ``class_id/session_id`` in this session."""
    next_number: int = 1001
    """Next order/booking number: per session, so numbers don't depend on other sessions."""


def stock_left(state: SessionState, product: Product) -> int:
    return product.stock - state.sold.get(product.id, 0)


def seats_left(state: SessionState, workshop: WorkshopClass, session_id: str) -> int:
    session = next(s for s in workshop.sessions if s.id == session_id)
    return session.seats_left - state.booked.get(f"{workshop.id}/{session_id}", 0)


def cart_count(state: SessionState) -> int:
    return sum(line.quantity for line in state.cart)


def add_to_cart(state: SessionState, catalog: Catalog, form: dict[str, str]) -> Product:
    """Add the product form's choice to the cart (merging with an identical line)."""
    product = catalog.product(form.get("product", ""))
    if product is None:
        raise ShopError("That product does not exist.")
    color = _option(form, "color", product.colors)
    size = _option(form, "size", product.sizes)
    quantity = _integer(form, "quantity", 1, MAX_QUANTITY)
    line = next((c for c in state.cart
                 if (c.product, c.color, c.size) == (product.id, color, size)), None)
    in_cart = sum(c.quantity for c in state.cart if c.product == product.id)
    left = stock_left(state, product)
    if left <= 0:
        raise ShopError(f"{product.name} is out of stock.")
    if in_cart + quantity > left:
        raise ShopError(f"Only {left} of {product.name} left in stock "
                        f"({in_cart} already in your cart).")
    if line is None:
        state.cart.append(CartLine(product=product.id, color=color, size=size, quantity=quantity))
    else:
        line.quantity += quantity
    return product


def remove_from_cart(state: SessionState, form: dict[str, str]) -> None:
    index = _integer(form, "line", 0, max(len(state.cart) - 1, 0))
    if index >= len(state.cart):
        raise ShopError("That cart line does not exist.")
    del state.cart[index]


def place_order(state: SessionState, catalog: Catalog, form: dict[str, str]) -> Order:
    """Turn the cart into an order; the cart empties."""
    if not state.cart:
        raise ShopError("Your cart is empty.")
    name, address, city = (_text(form, f) for f in ("full_name", "address", "city"))
    shipping = form.get("shipping", "")
    if shipping not in SHIPPING:
        raise ShopError(f"Choose a shipping option: {', '.join(SHIPPING)}.")
    lines = []
    for c in state.cart:
        product = catalog.product(c.product)
        assert product is not None  # only add_to_cart fills the cart, and it checks
        lines.append(OrderLine(**c.model_dump(), name=product.name, unit_price=product.price))
    subtotal = round(sum(line.unit_price * line.quantity for line in lines), 2)
    cost = SHIPPING[shipping][1]
    order = Order(number=state.next_number, lines=lines, shipping=shipping, name=name,
                  address=address, city=city, subtotal=subtotal, shipping_cost=cost,
                  total=round(subtotal + cost, 2))
    for line in lines:
        state.sold[line.product] = state.sold.get(line.product, 0) + line.quantity
    state.orders.append(order)
    state.cart.clear()
    state.next_number += 1
    return order


def book(state: SessionState, workshop: WorkshopClass, form: dict[str, str]) -> Booking:
    """Book seats in one session of a class."""
    session_id = form.get("session", "")
    if session_id not in {s.id for s in workshop.sessions}:
        raise ShopError("Choose one of the listed sessions.")
    seats = _integer(form, "seats", 1, MAX_SEATS)
    left = seats_left(state, workshop, session_id)
    if seats > left:
        raise ShopError(f"Only {left} seat{'s' if left != 1 else ''} left in that session."
                        if left else "That session is full.")
    name = _text(form, "name")
    email = _text(form, "email")
    if not _EMAIL.fullmatch(email):
        raise ShopError(f"{email!r} is not a valid email address.")
    booking = Booking(number=state.next_number, workshop=workshop.id, session=session_id,
                      seats=seats, name=name, email=email, total=round(seats * workshop.price, 2))
    key = f"{workshop.id}/{session_id}"
    state.booked[key] = state.booked.get(key, 0) + seats
    state.bookings.append(booking)
    state.next_number += 1
    return booking


def _option(form: dict[str, str], field: str, allowed: tuple[str, ...]) -> str | None:
    if not allowed:
        return None
    value = form.get(field, "")
    if value not in allowed:
        raise ShopError(f"Choose a {field}: {', '.join(allowed)}.")
    return value


def _integer(form: dict[str, str], field: str, lo: int, hi: int) -> int:
    raw = form.get(field, "").strip()
    try:
        value = int(raw)
    except ValueError:
        raise ShopError(f"{field} must be a whole number, not {raw!r}.") from None
    if not lo <= value <= hi:
        raise ShopError(f"{field} must be between {lo} and {hi}.")
    return value


def _text(form: dict[str, str], field: str) -> str:
    value = " ".join(form.get(field, "").split())
    if not value:
        raise ShopError(f"Please fill in {field.replace('_', ' ')}.")
    if len(value) > 200:
        raise ShopError(f"{field.replace('_', ' ')} is too long (200 characters at most).")
    return value
