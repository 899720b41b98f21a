"""Other wordings of the SQL templates' questions, for train copies that say the same thing differently.

    rephrase(task, 1)   # "What does the Trail Mug sell for? Answer with a number."

Every train task of a template asks its question in one wording, so a small model learns the
wording's first words as the key to the query: "How many units of the X ..." is
``units_sold_of_product``'s ``SUM(order_items.quantity)`` whatever follows, and the held-out
"How many units of the X are in stock?" gets it too (stop 26: 0/32). Copies of the train tasks in
other wordings put the words that decide the query (*sold*, *in stock*, *spent*, *single order*)
in different places and keep them, so what stays constant is the meaning, not the prefix. The
expert's reasoning and reference calls are those of the task: only the question changes.

Only seen templates have rephrasings: a held-out template has none (``heldout_only`` ones are
never drawn into train, and none of these wordings asks what a held-out template asks;
``tests/tasks/test_rephrase.py`` checks that no wording here is a held-out template's question).
"""

from __future__ import annotations

from trajforge.envs.sql.tasks import ANSWER_FORMAT
from trajforge.schema import Task

REPHRASINGS: dict[str, tuple[str, ...]] = {
    "customers_in_city": (
        "What is the number of customers based in {city}?",
        "Count the customers whose city is {city}.",
        "{city} is home to how many of the customers?",
    ),
    "low_stock_in_category": (
        "How many products in the {category} category have a stock below 50?",
        "Count the {category} products whose stock is under 50 units.",
        "Of the {category} products, how many have less than 50 units in stock?",
    ),
    "product_price": (
        "How much does the {product} cost?",
        "What does the {product} sell for?",
        "Look up the price of the {product}.",
    ),
    "priciest_in_category": (
        "What is the most expensive {category} product?",
        "Among the {category} products, which one costs the most?",
        "Name the {category} product with the top price.",
    ),
    "gold_customers_in_city": (
        "List the gold-tier customers in {city}.",
        "Who are the customers in {city} whose tier is gold?",
        "Name every customer from {city} with the gold tier.",
    ),
    "orders_from_city": (
        "What is the number of orders placed by customers who live in {city}?",
        "Count the orders made by {city} customers.",
        "How many orders came from customers in {city}?",
    ),
    "units_sold_of_product": (
        "What is the total quantity of the {product} sold?",
        "Across all orders, how many units of the {product} were sold?",
        "How many {product} units did customers buy altogether?",
    ),
    "city_spend_on_category": (
        "What is the total amount customers in {city} spent on {category} products?",
        "How much money did {city} customers pay for {category} products?",
        "Add up what customers from {city} spent on products in the {category} category.",
    ),
    "top_spender_in_city": (
        "Who is the biggest spender among the customers in {city}, by total money spent?",
        "Which {city} customer's purchases add up to the most money?",
        "Name the customer from {city} with the highest total spending.",
    ),
    "above_average_in_category": (
        "Count the {category} products priced above the average price of all products.",
        "How many products in the {category} category are more expensive than the overall "
        "average price?",
        "Of the {category} products, how many cost more than the average product does?",
    ),
    "never_ordered_in_city": (
        "Count the customers in {city} who have not placed a single order.",
        "How many {city} customers have no orders at all?",
        "How many customers living in {city} never ordered anything?",
    ),
    "biggest_order_in_city": (
        "Who placed the most expensive single order among the customers in {city}?",
        "Name the {city} customer behind the largest individual order by value.",
        "Which customer from {city} has the one order with the highest total?",
    ),
}
"""Template id → other wordings of its question (the answer-format sentence is added from the task)."""


def rephrase(task: Task, k: int) -> str | None:
    """``task``'s question in its template's ``k``-th other wording (taken modulo their number),
    with the task's own answer-format sentence; None when its template has none."""
    wordings = REPHRASINGS.get(task.template or "", ())
    if not wordings:
        return None
    question = wordings[k % len(wordings)].format(**task.entities)
    fmt = ANSWER_FORMAT.search(task.prompt)
    return f"{question} {fmt.group(1)}" if fmt else question


__all__ = ["REPHRASINGS", "rephrase"]
