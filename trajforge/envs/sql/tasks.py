"""SQL task templates: question + reference SQL, executed and verified at generation time.

``generate_sql_tasks(n, seed)`` draws template instances, runs every reference call through a
real ``SqlEnv``, fills the answer from what the queries returned, and keeps the task only if
replaying the reference makes ``verify()`` accept. Nothing here is computed in Python on the
side: the expected answer is whatever the executed reference SQL showed the expert.

Splits test generalisation along two axes:

* held-out *entities*: ``HELDOUT_COUNTRIES`` (and so their cities) and ``HELDOUT_CATEGORIES``
  (and so their products) appear only in the ``heldout`` split;
* held-out *templates*: those with ``heldout_only=True`` appear only in ``heldout``. Each is a
  close cousin of a seen template, so a 135M model has a fair chance.

``train`` and ``test`` share templates and entities but never a task instance.

Worlds (``envs/sql/worlds.py``): ``generator(db_seed, world)`` draws the same templates in another
world — its cities, categories and products, its table and column names (the reference SQL, the
table the expert describes and the expert's words follow the rename; the question keeps its plain
words) — for the train split of a pool drawn across worlds (``trajforge.tasks.worlds``).

``generate_sql_exec_tasks`` makes the same questions for ``sql-exec`` (execution accuracy): the
reference ends with ``submit_query`` of its last query, whose whole result is the expected value.
Top-1 templates are left out there: their last query also returns the ranking column, which the
question does not ask for.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from trajforge.envs.sql.env import SqlEnv
from trajforge.envs.sql.hints import tables_read
from trajforge.envs.sql.results import read_result
from trajforge.envs.sql.worlds import HELDOUT_CATEGORIES, HELDOUT_COUNTRIES, retail_world
from trajforge.envs.sqldb import CATEGORIES as ALL_CATEGORIES  # noqa: F401 - re-exported (old path)
from trajforge.envs.sqldb import TABLES
from trajforge.schema import Split, Task, Tier, ToolCall
from trajforge.tasks.pool import SynthReport
from trajforge.tasks.templates import TemplateGenerator, stable_id
from trajforge.tasks.verify import PlanRejected, replay_reference, verified

EntityKind = Literal["city", "country", "category", "product"]
AnswerKind = Literal["number", "name", "list"]


def entity_values(kind: EntityKind, heldout: bool, world: int = 0) -> tuple[str, ...]:
    """The values of one entity kind in the held-out (or the seen) partition of ``world``.

    Cities follow their country and products their category, so a held-out city or product
    never leaks into a train task through a related entity. A world > 0 holds no held-out value,
    so its held-out partition is empty and its seen one is all of it.
    """
    w = retail_world(world)
    if kind == "country":
        return tuple(c for c in w.countries if (c in HELDOUT_COUNTRIES) == heldout)
    if kind == "city":
        return tuple(c for c, k in w.cities.items() if (k in HELDOUT_COUNTRIES) == heldout)
    if kind == "category":
        return tuple(c for c in w.categories if (c in HELDOUT_CATEGORIES) == heldout)
    if kind == "product":
        return tuple(p for p, c in w.products.items() if (c in HELDOUT_CATEGORIES) == heldout)
    raise ValueError(f"unknown entity kind {kind!r}")


def heldout_values() -> set[str]:
    """Every held-out entity value, of every kind."""
    kinds: tuple[EntityKind, ...] = ("city", "country", "category", "product")
    return {v for k in kinds for v in entity_values(k, heldout=True)}


@dataclass(frozen=True)
class Template:
    """One question pattern with its reference solution and the expert's words for each step."""

    id: str
    tier: Tier
    slots: tuple[EntityKind, ...]
    """Entity kinds filled into prompt and SQL (one of each kind at most)."""
    prompt: str
    sql: tuple[str, ...]
    """Reference queries; ``{prev}`` is the first cell the previous query returned."""
    answer: AnswerKind
    """number: first cell; name: first cell; list: the whole first column."""
    reasoning: tuple[str, ...]
    """One sentence per reference call (schema calls, queries, submit); ``{answer}`` allowed."""
    describe: str | None = None
    """Hard templates: the table the expert inspects after listing tables."""
    heldout_only: bool = False
    unique_top: bool = False
    """The answer is a top-1 row: drop instances where the runner-up ties with it."""

    @property
    def schema_calls(self) -> tuple[ToolCall, ...]:
        return self.schema_calls_in(0)

    def schema_calls_in(self, world: int) -> tuple[ToolCall, ...]:
        """The schema discovery calls in ``world`` (the described table under its name there).

        In a world that renames tables or columns every template reads the schema first: the
        tables, then each table its queries read. An expert that writes renamed names it never
        looked up teaches a model to write names from memory, the very habit worlds are there to
        break (stop 22: trained on such episodes, the model wrote other worlds' names)."""
        names = retail_world(world)
        if self.explores_in(world):  # the queries are in world 0's names, renamed per call
            read = tables_read(" ".join(self.sql), list(TABLES))
            return (ToolCall(name="list_tables"),
                    *(ToolCall(name="describe_table", arguments={"table": names.sql(t)}) for t in read))
        if self.describe is None:
            return ()
        return (ToolCall(name="list_tables"),
                ToolCall(name="describe_table", arguments={"table": names.sql(self.describe)}))

    def explores_in(self, world: int) -> bool:
        """Whether ``world``'s schema calls are the plain exploration above, not the template's own."""
        names = retail_world(world)
        return bool(world and (names.tables or names.columns))


# Joins used by several templates, spelled once.
_ITEMS_BY_CITY = ("FROM order_items oi JOIN orders o ON oi.order_id = o.id "
                  "JOIN customers c ON o.customer_id = c.id")
_ITEMS_BY_CITY_PRODUCT = _ITEMS_BY_CITY + " JOIN products p ON oi.product_id = p.id"

TEMPLATES: tuple[Template, ...] = (
    # ---- easy: one table, one filter -----------------------------------------------------
    Template(
        id="customers_in_city", tier="easy", slots=("city",), answer="number",
        prompt="How many customers live in {city}? Answer with a number.",
        sql=("SELECT COUNT(*) FROM customers WHERE city = '{city}'",),
        reasoning=("I'll count the customers whose city is {city}.",
                   "The count is {answer}, so I'll submit it."),
    ),
    Template(
        id="low_stock_in_category", tier="easy", slots=("category",), answer="number",
        prompt="How many {category} products have fewer than 50 units in stock? "
               "Answer with a number.",
        sql=("SELECT COUNT(*) FROM products WHERE category = '{category}' AND stock < 50",),
        reasoning=("I'll count the {category} products with stock below 50.",
                   "The query returned {answer}, so that's the answer."),
    ),
    Template(
        id="product_price", tier="easy", slots=("product",), answer="number",
        prompt="What is the price of the {product}? Answer with a number.",
        sql=("SELECT price FROM products WHERE name = '{product}'",),
        reasoning=("I'll look up the price of the {product} in the products table.",
                   "The {product} costs {answer}, so I'll submit that."),
    ),
    Template(
        id="priciest_in_category", tier="easy", slots=("category",), answer="name",
        unique_top=True,
        prompt="Which {category} product has the highest price? Answer with the product name.",
        sql=("SELECT name, price FROM products WHERE category = '{category}' "
             "ORDER BY price DESC LIMIT 1",),
        reasoning=("I'll sort the {category} products by price and take the top one.",
                   "The most expensive one is the {answer}, so I'll submit its name."),
    ),
    Template(
        id="gold_customers_in_city", tier="easy", slots=("city",), answer="list",
        prompt="Which gold-tier customers live in {city}? "
               "Answer with their names separated by commas.",
        sql=("SELECT name FROM customers WHERE city = '{city}' AND tier = 'gold'",),
        reasoning=("I'll list the customers in {city} whose tier is gold.",
                   "The gold customers are {answer}, so I'll submit those names."),
    ),
    Template(  # held-out cousin of product_price: same table, another column
        id="product_stock", tier="easy", slots=("product",), answer="number", heldout_only=True,
        prompt="How many units of the {product} are in stock? Answer with a number.",
        sql=("SELECT stock FROM products WHERE name = '{product}'",),
        reasoning=("I'll look up the stock of the {product} in the products table.",
                   "There are {answer} units in stock, so I'll submit {answer}."),
    ),
    # ---- medium: join + aggregate ----------------------------------------------------------
    Template(
        id="orders_from_city", tier="medium", slots=("city",), answer="number",
        prompt="How many orders were placed by customers in {city}? Answer with a number.",
        sql=("SELECT COUNT(*) FROM orders o JOIN customers c ON o.customer_id = c.id "
             "WHERE c.city = '{city}'",),
        reasoning=("I'll join orders to customers and count the orders from {city}.",
                   "The order count for {city} is {answer}, so I'll submit it."),
    ),
    Template(
        id="units_sold_of_product", tier="medium", slots=("product",), answer="number",
        prompt="How many units of the {product} have been sold in total? Answer with a number.",
        sql=("SELECT SUM(oi.quantity) FROM order_items oi JOIN products p "
             "ON oi.product_id = p.id WHERE p.name = '{product}'",),
        reasoning=("I'll add up the quantities in order_items for the {product}.",
                   "In total {answer} units were sold, so I'll submit {answer}."),
    ),
    Template(
        id="city_spend_on_category", tier="medium", slots=("city", "category"), answer="number",
        prompt="How much did customers in {city} spend on {category} products? "
               "Answer with a number.",
        sql=(f"SELECT ROUND(SUM(oi.quantity * oi.unit_price), 2) {_ITEMS_BY_CITY_PRODUCT} "
             "WHERE c.city = '{city}' AND p.category = '{category}'",),
        reasoning=("I'll sum quantity times unit price over {category} items bought in {city}.",
                   "They spent {answer}, so I'll submit that amount."),
    ),
    Template(
        id="top_spender_in_city", tier="medium", slots=("city",), answer="name", unique_top=True,
        prompt="Which customer in {city} has spent the most money? "
               "Answer with the customer's name.",
        sql=("SELECT c.name, ROUND(SUM(oi.quantity * oi.unit_price), 2) AS total "
             f"{_ITEMS_BY_CITY} WHERE c.city = '{{city}}' "
             "GROUP BY c.id ORDER BY total DESC LIMIT 1",),
        reasoning=("I'll total each {city} customer's spending and take the largest.",
                   "{answer} spent the most, so I'll submit that name."),
    ),
    Template(  # held-out cousin of city_spend_on_category: units instead of money
        id="city_units_of_category", tier="medium", slots=("city", "category"), answer="number",
        heldout_only=True,
        prompt="How many units of {category} products did customers in {city} buy? "
               "Answer with a number.",
        sql=(f"SELECT SUM(oi.quantity) {_ITEMS_BY_CITY_PRODUCT} "
             "WHERE c.city = '{city}' AND p.category = '{category}'",),
        reasoning=("I'll sum the quantities of {category} items bought by customers in {city}.",
                   "They bought {answer} units, so I'll submit {answer}."),
    ),
    # ---- hard: schema discovery, then a subquery or two dependent queries ------------------
    Template(
        id="above_average_in_category", tier="hard", slots=("category",), answer="number",
        describe="products",
        prompt="How many {category} products cost more than the average price of all products? "
               "Answer with a number.",
        sql=("SELECT ROUND(AVG(price), 2) FROM products",
             "SELECT COUNT(*) FROM products WHERE category = '{category}' AND price > {prev}"),
        reasoning=("First I'll see which tables the database has.",
                   "Prices should be in the products table, so I'll check its columns.",
                   "I need the average price over all products first.",
                   "Now I'll count the {category} products priced above that average.",
                   "The count above average is {answer}, so I'll submit it."),
    ),
    Template(
        id="never_ordered_in_city", tier="hard", slots=("city",), answer="number",
        describe="orders",
        prompt="How many customers in {city} have never placed an order? Answer with a number.",
        sql=("SELECT COUNT(*) FROM customers WHERE city = '{city}' "
             "AND id NOT IN (SELECT customer_id FROM orders)",),
        reasoning=("Let me list the tables to find customers and orders.",
                   "I'll check how the orders table refers to customers.",
                   "I'll count {city} customers whose id never appears in orders.",
                   "The number of {city} customers without orders is {answer}, so I'll submit it."),
    ),
    Template(
        id="biggest_order_in_city", tier="hard", slots=("city",), answer="name", unique_top=True,
        describe="order_items",
        prompt="Which customer in {city} placed the single most expensive order? "
               "Answer with the customer's name.",
        sql=("SELECT o.id, ROUND(SUM(oi.quantity * oi.unit_price), 2) AS total "
             f"{_ITEMS_BY_CITY} WHERE c.city = '{{city}}' "
             "GROUP BY o.id ORDER BY total DESC LIMIT 1",
             "SELECT c.name FROM customers c JOIN orders o ON o.customer_id = c.id "
             "WHERE o.id = {prev}"),
        reasoning=("I'll start by listing the tables.",
                   "Order totals come from order_items, so I'll look at its columns.",
                   "I'll find the {city} order with the largest total.",
                   "Now I'll look up who placed that order.",
                   "The order was placed by {answer}, so I'll submit that name."),
    ),
)

# ---- composition: train-only cells of the grid the held-out templates sit in -----------------
# The held-out-only templates each combine two things the train templates show apart: a product
# looked up by name (``product_price``) with its stock (``low_stock_in_category``), and units
# (``units_sold_of_product``) with the city x category join (``city_spend_on_category``). Trained
# on those alone, a 135M model copies the nearest template instead (``COUNT(*)`` or
# ``SUM(oi.quantity)`` for a stock question; stops 35-42: 0/32 and <= 2/16 held-out). These
# templates fill in more of each grid — stock and another column in other frames, units and
# spending over each filter — so training shows that the question's words choose the column and
# the filter, while the held-out cells themselves (a product's stock by name; units over
# city x category) stay unseen: ``test_compose_never_holds_a_heldout_structure``. They are drawn
# for train and test only (``generate_compose_tasks``), never in the held-out split. A first
# sentence that names a category or a product says which it is and the column that follows
# ("Toys is a category, so … whose category is 'Toys'"): both are bare names in a question, and
# without the sentence a warm RFT round tipped the held-out stock question between the two
# columns from seed to seed (stop 48, README "Composition templates": 71.5/80.6% → 91.9/80.6%).
COMPOSE_TEMPLATES: tuple[Template, ...] = (
    Template(
        id="category_stock_total", tier="easy", slots=("category",), answer="number",
        prompt="How many units of {category} products are in stock in total? Answer with a number.",
        sql=("SELECT SUM(stock) FROM products WHERE category = '{category}'",),
        reasoning=("{category} is a category, so I'll add up the stock of the products whose category "
                   "is '{category}'.",
                   "There are {answer} units in stock, so I'll submit {answer}."),
    ),
    Template(
        id="most_stocked_in_category", tier="easy", slots=("category",), answer="name",
        unique_top=True,
        prompt="Which {category} product has the most units in stock? Answer with the product name.",
        sql=("SELECT name, stock FROM products WHERE category = '{category}' "
             "ORDER BY stock DESC LIMIT 1",),
        reasoning=("{category} is a category, so I'll sort the products whose category is '{category}' "
                   "by stock and take the top one.",
                   "The {answer} has the most units in stock, so I'll submit its name."),
    ),
    Template(
        id="product_category", tier="easy", slots=("product",), answer="name",
        prompt="Which category is the {product} in? Answer with the category name.",
        sql=("SELECT category FROM products WHERE name = '{product}'",),
        reasoning=("The {product} is a product, so I'll look up the category of the product whose name "
                   "is '{product}'.",
                   "The {product} is in {answer}, so I'll submit {answer}."),
    ),
    Template(
        id="city_units_total", tier="medium", slots=("city",), answer="number",
        prompt="How many units did customers in {city} buy in total? Answer with a number.",
        sql=(f"SELECT SUM(oi.quantity) {_ITEMS_BY_CITY} WHERE c.city = '{{city}}'",),
        reasoning=("I'll sum the quantities of all items bought by customers in {city}.",
                   "They bought {answer} units, so I'll submit {answer}."),
    ),
    Template(
        id="category_units_sold", tier="medium", slots=("category",), answer="number",
        prompt="How many units of {category} products have been sold in total? Answer with a number.",
        sql=("SELECT SUM(oi.quantity) FROM order_items oi JOIN products p "
             "ON oi.product_id = p.id WHERE p.category = '{category}'",),
        reasoning=("{category} is a category, so I'll add up the quantities in order_items of the products "
                   "whose category is '{category}'.",
                   "In total {answer} units were sold, so I'll submit {answer}."),
    ),
    Template(
        id="city_spend_total", tier="medium", slots=("city",), answer="number",
        prompt="How much did customers in {city} spend in total? Answer with a number.",
        sql=(f"SELECT ROUND(SUM(oi.quantity * oi.unit_price), 2) {_ITEMS_BY_CITY} "
             "WHERE c.city = '{city}'",),
        reasoning=("I'll sum quantity times unit price over all items bought in {city}.",
                   "They spent {answer}, so I'll submit that amount."),
    ),
    Template(  # units over a city and a product: the held-out city x category cell's neighbour
        id="city_units_of_product", tier="medium", slots=("city", "product"), answer="number",
        prompt="How many units of the {product} did customers in {city} buy? Answer with a number.",
        sql=(f"SELECT SUM(oi.quantity) {_ITEMS_BY_CITY_PRODUCT} "
             "WHERE c.city = '{city}' AND p.name = '{product}'",),
        reasoning=("The {product} is a product, so I'll sum the quantities bought by customers in {city} "
                   "of the product whose name is '{product}'.",
                   "They bought {answer} units, so I'll submit {answer}."),
    ),
    Template(
        id="product_revenue", tier="medium", slots=("product",), answer="number",
        prompt="How much money has been spent on the {product} in total? Answer with a number.",
        sql=("SELECT ROUND(SUM(oi.quantity * oi.unit_price), 2) FROM order_items oi JOIN products p "
             "ON oi.product_id = p.id WHERE p.name = '{product}'",),
        reasoning=("The {product} is a product, so I'll sum quantity times unit price in order_items for "
                   "the product whose name is '{product}'.",
                   "The {product} brought in {answer}, so I'll submit that amount."),
    ),
)
TEMPLATES_BY_ID: dict[str, Template] = {t.id: t for t in (*TEMPLATES, *COMPOSE_TEMPLATES)}


def generate_compose_tasks(n: int, seed: int = 0, db_seed: int = 0, test: int = 0,
                           only: Sequence[str] = ()) -> SynthReport:
    """``n`` verified train tasks (and ``test`` test tasks) of ``COMPOSE_TEMPLATES`` (``only``:
    those ids), seen entities only: more of the grid the held-out templates sit in, to add to a
    pool's train split (``synth --compose N``). Their ids differ from every ``TEMPLATES`` task
    (the template is in the id), so they never duplicate a pool's own."""
    return generator(db_seed).compose(COMPOSE_TEMPLATES, n, seed, test, only)


def task_id(template: Template, entities: dict[str, str], db_seed: int, world: int = 0) -> str:
    """Stable id: same template, entities and database give the same id on any machine."""
    return stable_id("sql", template.id, _id_key(entities, db_seed, world))


def _id_key(entities: dict[str, str], db_seed: int, world: int) -> list:
    # World 0 keeps the key it always had, so its ids are those of pools made before worlds.
    return [entities, db_seed, world] if world else [entities, db_seed]


def generate_sql_tasks(n: int, seed: int = 0, db_seed: int = 0) -> SynthReport:
    """``n`` verified SQL tasks split train/test/heldout, plus counts of dropped candidates.

    Fewer than ``n`` come back only when the template x entity space runs out
    (``dropped["unfilled"]`` says how many places stayed empty).
    """
    return generator(db_seed)(n, seed)


def generator(db_seed: int = 0, world: int = 0) -> TemplateGenerator[Template]:
    """The SQL templates on the skeleton (in ``world``): listed order; a template leaves the
    rotation once its whole entity space has been drawn, so a small space can't loop forever on
    duplicates."""
    return TemplateGenerator(
        templates=TEMPLATES, draw=lambda t, rng, heldout: draw_entities(t, rng, heldout, world),
        space=lambda t, heldout: _space_size(t, heldout, world),
        task_id=lambda t, e: task_id(t, e, db_seed, world),
        build=lambda t, e, split: build_task(t, e, split, db_seed, world))


EXEC_ENV = "sql-exec"
EXEC_TEMPLATES: tuple[Template, ...] = tuple(t for t in TEMPLATES if not t.unique_top)
"""The templates whose last query returns exactly what the question asks (execution accuracy)."""
ANSWER_FORMAT = re.compile(r"\s*(Answer with [^.?!]*[.?!])\s*$")
"""A question's closing answer-format sentence (group 1), e.g. ``Answer with a number.``"""


def generate_sql_exec_tasks(n: int, seed: int = 0, db_seed: int = 0) -> SynthReport:
    """``n`` verified ``sql-exec`` tasks (the templates' questions, answered by a query)."""
    return exec_generator(db_seed)(n, seed)


def exec_generator(db_seed: int = 0, world: int = 0) -> TemplateGenerator[Template]:
    """The ``sql-exec`` templates on the skeleton (in ``world``)."""
    return TemplateGenerator(
        templates=EXEC_TEMPLATES, draw=lambda t, rng, heldout: draw_entities(t, rng, heldout, world),
        space=lambda t, heldout: _space_size(t, heldout, world),
        task_id=lambda t, e: stable_id(EXEC_ENV, t.id, _id_key(e, db_seed, world)),
        build=lambda t, e, split: build_exec_task(t, e, split, db_seed, world))


def build_exec_task(template: Template, entities: dict[str, str], split: Split,
                    db_seed: int = 0, world: int = 0) -> Task | str:
    """The template's task for ``sql-exec``: its reference up to the last query, then
    ``submit_query`` of that query; verified (expected = the query's whole result)."""
    task = build_task(template, entities, split, db_seed, world)
    if isinstance(task, str):
        return task
    calls = task.reference[:-1]
    probe = task.model_copy(update={
        "id": stable_id(EXEC_ENV, template.id, _id_key(entities, db_seed, world)), "env": EXEC_ENV,
        "prompt": ANSWER_FORMAT.sub("", task.prompt), "reference": (), "expected": None,
        "reasoning": (), "toolset_fingerprint": None})
    submit = ToolCall(name="submit_query", arguments={"query": calls[-1].arguments["query"]})
    try:
        done, _ = verified(probe, [*calls, submit])
    except PlanRejected as e:
        return e.reason
    return done


def draw_entities(template: Template, rng: random.Random, heldout: bool, world: int = 0) -> dict[str, str]:
    return {k: rng.choice(entity_values(k, heldout, world)) for k in template.slots}


def _space_size(template: Template, heldout: bool, world: int = 0) -> int:
    size = 1
    for kind in template.slots:
        size *= len(entity_values(kind, heldout, world))
    return size


def _answer_values(expected: object) -> set[str]:
    items = expected if isinstance(expected, list) else [expected]
    return {str(i) for i in items}


def build_task(template: Template, entities: dict[str, str], split: Split,
               db_seed: int = 0, world: int = 0) -> Task | str:
    """Execute the template's reference (in ``world``) and return the verified Task, or a drop
    reason."""
    probe = Task(id=task_id(template, entities, db_seed, world), env="sql",
                 prompt=template.prompt.format(**entities), tier=template.tier, split=split,
                 template=template.id, reference=(), expected=None, entities=entities,
                 seed=db_seed, world=world)
    env = SqlEnv()
    env.reset(probe)
    try:
        outcome = _run_reference(env, template, entities, world)
    finally:
        env.close()
    if isinstance(outcome, str):
        return outcome
    calls, rows = outcome
    try:
        answer, expected = _read_answer(template.answer, rows)
    except ValueError:
        return "reference_error"
    if split != "heldout" and heldout_values() & _answer_values(expected):
        return "heldout_leak"  # e.g. a train question answered by a held-out city
    submit = ToolCall(name="submit_answer", arguments={"answer": answer})
    task = probe.model_copy(update={"reference": (*calls, submit), "expected": expected})
    if not replay_reference(task).correct:
        return "verifier_rejected"
    return task.model_copy(update={"reasoning": tuple(reasoning_for(task, i) for i in range(len(task.reference)))})


def _run_reference(env: SqlEnv, template: Template, entities: dict[str, str], world: int = 0
                   ) -> tuple[list[ToolCall], list[list[str]]] | str:
    """Run schema calls and queries; returns (calls, last rows) or a drop reason."""
    calls = list(template.schema_calls_in(world))
    for call in calls:
        if not env.execute(call).ok:
            return "reference_error"
    rows: list[list[str]] = []
    prev = ""
    names = retail_world(world)
    for fmt in template.sql:
        query = names.sql(fmt.format(**entities, prev=prev))  # renamed after filling: values stay
        result = env.execute(ToolCall(name="run_sql", arguments={"query": query}))
        if not result.ok:
            return "reference_error"
        rows = read_result(result.content)
        if not rows or rows[0][0] == "NULL":
            return "empty_result"
        if template.unique_top and _ties_runner_up(env, query):
            return "ambiguous_answer"
        calls.append(ToolCall(name="run_sql", arguments={"query": query}))
        prev = rows[0][0]
    return calls, rows


def _ties_runner_up(env: SqlEnv, query: str) -> bool:
    """For a top-1 query: does the second row have the same ranking value as the first?"""
    if not query.rstrip().endswith("LIMIT 1"):
        return False
    call = ToolCall(name="run_sql", arguments={"query": query.rstrip()[:-1] + "2"})
    result = env.execute(call)
    rows = read_result(result.content) if result.ok else []
    return len(rows) == 2 and rows[0][-1] == rows[1][-1]


def _read_answer(kind: AnswerKind, rows: list[list[str]]) -> tuple[str, object]:
    """(submit_answer argument, expected value) read from the last query's rows."""
    if kind == "list":
        names = [r[0] for r in rows]
        return ", ".join(names), names
    cell = rows[0][0]
    if kind == "number":
        if re.fullmatch(r"-?\d+", cell):
            return cell, int(cell)
        return cell, float(cell)  # ValueError for a non-number: the template is broken
    return cell, cell


def reasoning_for(task: Task, call_index: int) -> str:
    """The sentence the expert says before reference call ``call_index`` of ``task``."""
    template = TEMPLATES_BY_ID.get(task.template)
    if template is None:  # synthesized or bring-your-own: no template wording, say what the call does
        if not 0 <= call_index < len(task.reference):
            raise IndexError(f"{task.id} has {len(task.reference)} reference calls, "
                             f"not {call_index + 1}")
        return plain_reasoning(task.reference[call_index])
    own = call_index  # the template's sentence for this call
    if template.explores_in(task.world):  # the world's own schema calls, then the template's
        explored = len(template.schema_calls_in(task.world))
        if 0 <= call_index < explored:
            return plain_reasoning(task.reference[call_index])
        own += len(template.schema_calls) - explored
    if not 0 <= own < len(template.reasoning):
        raise IndexError(f"{task.id} has {len(task.reference)} reference calls, not {call_index + 1}")
    if call_index == len(task.reference) - 1 and task.reference[call_index].name == "submit_query":
        return plain_reasoning(task.reference[call_index])  # the answer is the query's result
    words = retail_world(task.world).prose(template.reasoning[own])  # its tables' names
    return words.format(**task.entities, answer=_answer_text(task.expected))


def plain_reasoning(call: ToolCall) -> str:
    """A neutral sentence for a call outside any template (it states no result in advance)."""
    args = call.arguments
    if call.name == "list_tables":
        return "First I'll see which tables the database has."
    if call.name == "describe_table":
        return f"I'll check the columns of the {args.get('table', '')} table."
    if call.name == "run_sql":
        return "I'll query the database for what the question asks."
    if call.name == "submit_answer":
        return f"The query returned {args.get('answer', '')}, so I'll submit that."
    if call.name == "submit_query":
        return "That query returns what the question asks, so I'll submit it."
    return f"I'll call {call.name}."


def _answer_text(expected: object) -> str:
    if isinstance(expected, list):
        return ", ".join(map(str, expected))
    return str(expected)


__all__ = [
    "COMPOSE_TEMPLATES", "EXEC_TEMPLATES", "HELDOUT_CATEGORIES", "HELDOUT_COUNTRIES", "TEMPLATES", "Template", "build_exec_task",
    "build_task", "draw_entities", "entity_values", "exec_generator", "generate_compose_tasks", "generate_sql_exec_tasks", "generate_sql_tasks", "generator", "heldout_values", "plain_reasoning", "reasoning_for",
    "task_id",
]
