"""What a web task wants the shop's state to be at the end, and how to check it.

A task's ``expected`` is a ``Goal`` (stored as plain JSON): an order with the right items,
options, quantities and shipping (optionally a ship-to address and a budget), or a booking of the
right class session, seats and attendee. ``goal_mismatch`` compares one placed order or booking
with the goal and says what differs, so a verdict's detail names the mistake.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from trajforge.envs.web.shop.state import Booking, Order


class ItemGoal(BaseModel):
    product: str
    """Product id."""
    name: str
    """Product name (for messages)."""
    color: str | None = None
    """Required color; None when any color will do."""
    size: str | None = None
    """Required size; None when any size will do."""
    quantity: int = 1


class Address(BaseModel):
    name: str
    address: str
    city: str


class OrderGoal(BaseModel):
    kind: Literal["order"] = "order"
    items: list[ItemGoal]
    shipping: str
    """``standard``, ``express`` or ``pickup``."""
    ship_to: Address | None = None
    """A different recipient; None means the account's own (prefilled) address."""
    max_total: float | None = None
    """The order total, shipping included, must not exceed this."""


class BookingGoal(BaseModel):
    kind: Literal["booking"] = "booking"
    workshop: str
    """Class id."""
    session: str
    """Session id, ``2025-06-14T10:00``."""
    seats: int
    name: str
    email: str


Goal = Annotated[OrderGoal | BookingGoal, Field(discriminator="kind")]
GOAL = TypeAdapter(Goal)


def read_goal(expected: object) -> OrderGoal | BookingGoal:
    """A task's ``expected`` as a Goal (ValueError naming the problem when it is not one)."""
    try:
        return GOAL.validate_python(expected)
    except ValidationError as e:
        raise ValueError(f"web task expected value is not a valid goal: {e}") from None


def same_text(a: str, b: str) -> bool:
    """Case- and whitespace-insensitive equality, as a person would judge a form entry."""
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def item_matches(goal: ItemGoal, product: str, color: str | None, size: str | None) -> bool:
    return (product == goal.product and (goal.color is None or color == goal.color)
            and (goal.size is None or size == goal.size))


def goal_mismatch(goal: OrderGoal | BookingGoal, placed: Order | Booking) -> str | None:
    """None when ``placed`` fulfils ``goal``, else a sentence saying what is wrong."""
    if isinstance(goal, OrderGoal):
        if not isinstance(placed, Order):
            return "a class was booked, but the task was to place an order"
        return _order_mismatch(goal, placed)
    if not isinstance(placed, Booking):
        return "an order was placed, but the task was to book a class"
    return _booking_mismatch(goal, placed)


def _order_mismatch(goal: OrderGoal, order: Order) -> str | None:
    for item in goal.items:
        got = sum(line.quantity for line in order.lines
                  if item_matches(item, line.product, line.color, line.size))
        if got != item.quantity:
            return f"expected {item.quantity} x {describe_item(item)}, the order has {got}"
    wanted = sum(i.quantity for i in goal.items)
    placed = sum(line.quantity for line in order.lines)
    if placed != wanted:
        extra = [line.name for line in order.lines
                 if not any(item_matches(i, line.product, line.color, line.size)
                            for i in goal.items)]
        return f"the order has items the task did not ask for: {', '.join(extra)}"
    if order.shipping != goal.shipping:
        return f"shipping is {order.shipping}, expected {goal.shipping}"
    if goal.ship_to is not None:
        for field in ("name", "address", "city"):
            want, got_text = getattr(goal.ship_to, field), getattr(order, field)
            if not same_text(want, got_text):
                return f"ship-to {field} is {got_text!r}, expected {want!r}"
    if goal.max_total is not None and order.total > goal.max_total + 1e-9:
        return f"the total ${order.total:.2f} is over the ${goal.max_total:.2f} budget"
    return None


def _booking_mismatch(goal: BookingGoal, booking: Booking) -> str | None:
    if booking.workshop != goal.workshop:
        return f"booked class {booking.workshop}, expected {goal.workshop}"
    if booking.session != goal.session:
        return f"booked the {booking.session} session, expected {goal.session}"
    if booking.seats != goal.seats:
        return f"booked {booking.seats} seats, expected {goal.seats}"
    if not same_text(booking.name, goal.name):
        return f"booked for {booking.name!r}, expected {goal.name!r}"
    if not same_text(booking.email, goal.email):
        return f"booking email is {booking.email!r}, expected {goal.email!r}"
    return None


MISMATCH_KINDS: tuple[tuple[str, str], ...] = (
    ("a class was booked, but", "wrong_kind"),
    ("an order was placed, but", "wrong_kind"),
    ("expected ", "wrong_item"),  # the goal's item, its options or quantity not in the order
    ("the order has items", "wrong_item"),
    ("booked class ", "wrong_item"),
    ("the total ", "over_budget"),
    ("shipping is ", "wrong_form_value"),
    ("ship-to ", "wrong_form_value"),
    ("booking email is ", "wrong_form_value"),
    ("booked ", "wrong_form_value"),  # the session, the seats or the attendee (after "booked class")
)
"""How each sentence ``goal_mismatch`` writes begins, and the fail reason it stands for (first match
wins): what ``mismatch_kind`` reads back from a stored verdict."""


def mismatch_kind(sentence: str) -> str | None:
    """The fail reason of a ``goal_mismatch`` sentence (None for any other text)."""
    return next((kind for start, kind in MISMATCH_KINDS if sentence.startswith(start)), None)


def goal_of(placed: Order | Booking) -> OrderGoal | BookingGoal:
    """The strictest goal ``placed`` fulfils: exactly its items, options, shipping and recipient.

    Plan-driven synthesis (``WebEnv.expected_outcome``) makes this the task's expected value, so
    the goal is what the executed plan did, never what a task writer said it would do.
    """
    if isinstance(placed, Booking):
        return BookingGoal(workshop=placed.workshop, session=placed.session, seats=placed.seats,
                           name=placed.name, email=placed.email)
    items: dict[tuple[str, str | None, str | None], ItemGoal] = {}
    for line in placed.lines:
        key = (line.product, line.color, line.size)
        if key in items:
            items[key].quantity += line.quantity
        else:
            items[key] = ItemGoal(product=line.product, name=line.name, color=line.color,
                                  size=line.size, quantity=line.quantity)
    return OrderGoal(items=list(items.values()), shipping=placed.shipping,
                     ship_to=Address(name=placed.name, address=placed.address, city=placed.city))


def describe_item(item: ItemGoal) -> str:
    opts = [f"color {item.color}" if item.color else "", f"size {item.size}" if item.size else ""]
    opts = [o for o in opts if o]
    return item.name + (f" ({', '.join(opts)})" if opts else "")
