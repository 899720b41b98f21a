"""The shop site over real loopback HTTP: pages, links, forms, validation, sessions; the page parser."""

from __future__ import annotations

import httpx
import pytest

from trajforge.envs.web.shop.catalog import CATEGORIES, build_catalog, slug
from trajforge.envs.web.shop.page import parse_page
from trajforge.envs.web.shop.server import COOKIE, MAX_BODY, shared_server


@pytest.fixture
def shop():
    """A browser-less client with its own session on the shared server (seed 0)."""
    server = shared_server()
    sid = server.open_session(0)
    client = httpx.Client(base_url=server.base_url, cookies={COOKIE: sid}, follow_redirects=True,
                          trust_env=False, timeout=10)
    yield client, server, sid
    client.close()
    server.close_session(sid)


def page(resp: httpx.Response):
    return parse_page(resp.text, resp.url.raw_path.decode())


def product_with_sizes():
    return next(p for p in build_catalog(0).products if p.sizes and p.stock >= 3
                and len(p.colors) > 1)


def test_catalog_is_deterministic_and_varied():
    a, b, c = build_catalog(0), build_catalog(0), build_catalog(1)
    assert a == b and a.products != c.products
    assert len({p.id for p in a.products}) == len(a.products) == 120
    assert {p.category for p in a.products} == set(CATEGORIES)
    assert any(p.stock == 0 for p in a.products) and any(p.sizes for p in a.products)


def test_home_lists_categories_and_every_page_has_nav_and_search(shop):
    client, server, _ = shop
    assert server.base_url.startswith("http://127.0.0.1:")
    home = page(client.get("/"))
    labels = [e.label for e in home.elements if e.kind == "link"]
    assert labels[:4] == ["Home", "Classes", "Cart (0)", "Orders"]
    assert set(CATEGORIES) <= set(labels)
    assert home.forms[0].action == "/search" and home.forms[0].method == "get"
    assert home.title == "Home | Trailhead Outfitters"


def test_search_finds_by_name_words_and_falls_back(shop):
    client, _, _ = shop
    p = build_catalog(0).products[7]
    hits = page(client.get("/search", params={"q": p.name.lower()}))
    first = next(e for e in hits.elements if (e.href or "").startswith("/product/"))
    assert first.label == p.name and first.href == f"/product/{p.id}"
    # No product matches every word, so products matching any word come back.
    loose = page(client.get("/search", params={"q": f"{p.brand} zzzz"}))
    assert any(e.label.startswith(p.brand) for e in loose.elements)
    none = page(client.get("/search", params={"q": "qqqq"}))
    assert "No products match." in none.lines()


def test_category_filters_and_sorts(shop):
    client, _, _ = shop
    catalog = build_catalog(0)
    cat = "Running Shoes"
    listing = page(client.get(f"/category/{slug(cat)}",
                              params={"color": "red", "sort": "price_asc", "max_price": "200"}))
    shown = [e.label for e in listing.elements if (e.href or "").startswith("/product/")]
    want = sorted((p for p in catalog.in_category(cat) if "red" in p.colors),
                  key=lambda p: (p.price, p.name))
    assert shown == [p.name for p in want][:10]
    sort = next(e for e in listing.elements if e.name == "sort")
    assert sort.value == "price_asc" and ("rating", "Customer rating") in sort.options
    bad = client.get(f"/category/{slug(cat)}", params={"max_price": "cheap"})
    assert bad.status_code == 400 and "Max price must be a number" in page(bad).errors[0]


def test_listing_pages(shop):
    client, _, _ = shop
    first = page(client.get("/category/t-shirts"))
    assert "Showing 1-10 of 12 products." in first.lines()
    nxt = next(e for e in first.elements if e.label == "Next page")
    second = page(client.get(nxt.href))
    assert "Showing 11-12 of 12 products." in second.lines()
    assert client.get("/category/t-shirts", params={"page": "9"}).status_code == 400


def test_add_to_cart_checkout_and_confirmation(shop):
    client, server, sid = shop
    p = product_with_sizes()
    product = page(client.get(f"/product/{p.id}"))
    form = product.forms[1]
    assert form.method == "post" and form.action == "/cart/add"
    assert form.hidden == [("product", p.id)]
    assert [product.element(i).name for i in form.fields] == ["color", "size", "quantity"]
    resp = client.post("/cart/add", data={"product": p.id, "color": p.colors[1],
                                          "size": p.sizes[0], "quantity": "2"})
    assert resp.status_code == 200 and resp.url.path == "/cart"  # 303 followed
    cart = page(resp)
    assert f"Added {p.name} to your cart." in cart.lines() and cart.elements[2].label == "Cart (2)"
    checkout = page(client.get("/checkout"))
    acct = build_catalog(0).account
    values = {e.name: e.value for e in checkout.elements if e.name}
    assert values["full_name"] == acct.name and values["shipping"] == "standard"
    done = client.post("/checkout", data={"full_name": "Rosa Vogel", "address": "1 Mill Lane",
                                          "city": "Graz", "shipping": "express"})
    assert done.url.path == "/orders/1001"
    assert "Total: $%.2f" % (p.price * 2 + 14.99) in page(done).lines()
    state = server.session_state(sid)
    assert state.cart == [] and state.orders[0].lines[0].size == p.sizes[0]
    assert state.sold == {p.id: 2}


def test_shop_refuses_bad_forms_with_400(shop):
    client, server, sid = shop
    p = product_with_sizes()
    cases = [
        ({"product": p.id, "color": "plaid", "size": p.sizes[0], "quantity": "1"}, "Choose a color"),
        ({"product": p.id, "color": p.colors[0], "size": p.sizes[0], "quantity": "x"},
         "quantity must be a whole number"),
        ({"product": p.id, "color": p.colors[0], "size": p.sizes[0], "quantity": "11"},
         "between 1 and 10"),
        ({"product": "nope", "quantity": "1"}, "does not exist"),
    ]
    for data, message in cases:
        resp = client.post("/cart/add", data=data)
        assert resp.status_code == 400 and message in page(resp).errors[0], data
    empty = client.post("/checkout", data={"full_name": "A", "address": "B", "city": "C",
                                           "shipping": "standard"})
    assert empty.status_code == 400 and page(empty).errors == ["Your cart is empty."]
    client.post("/cart/add", data={"product": p.id, "color": p.colors[0], "size": p.sizes[0],
                                   "quantity": "1"})
    blank = client.post("/checkout", data={"full_name": " ", "address": "B", "city": "C",
                                           "shipping": "standard"})
    assert blank.status_code == 400 and "Please fill in full name." in page(blank).errors
    assert server.session_state(sid).orders == []


def test_stock_is_enforced_per_session(shop):
    client, _, _ = shop
    catalog = build_catalog(0)
    low = next(p for p in catalog.products if 1 <= p.stock <= 3 and not p.sizes)
    sold_out = next(p for p in catalog.products if p.stock == 0)
    data = {"product": low.id, "color": low.colors[0], "quantity": str(low.stock)}
    assert client.post("/cart/add", data=data).status_code == 200
    again = client.post("/cart/add", data={**data, "quantity": "1"})
    assert again.status_code == 400 and f"Only {low.stock} of" in page(again).errors[0]
    out = client.post("/cart/add", data={"product": sold_out.id, "color": sold_out.colors[0],
                                         "size": (sold_out.sizes or ("",))[0], "quantity": "1"})
    assert out.status_code == 400 and "out of stock" in page(out).errors[0]


def test_booking_form(shop):
    client, server, sid = shop
    workshop = next(c for c in build_catalog(0).classes
                    if any(2 <= s.seats_left <= 7 for s in c.sessions))
    session = next(s for s in workshop.sessions if 2 <= s.seats_left <= 7)
    booking_page = page(client.get(f"/classes/{workshop.id}"))
    select = next(e for e in booking_page.elements if e.name == "session")
    assert (session.id, f"{session.label} ({session.seats_left} seats left)") in select.options
    url = f"/classes/{workshop.id}/book"
    bad = client.post(url, data={"session": session.id, "seats": "2", "name": "Ana",
                                 "email": "not-an-email"})
    assert bad.status_code == 400 and "not a valid email" in page(bad).errors[0]
    ok = client.post(url, data={"session": session.id, "seats": "2", "name": "Ana Silva",
                                "email": "ana@example.com"})
    assert ok.url.path == "/bookings/1001" and ok.status_code == 200
    assert server.session_state(sid).booked == {f"{workshop.id}/{session.id}": 2}
    left = session.seats_left - 2
    too_many = client.post(url, data={"session": session.id, "seats": str(left + 1),
                                      "name": "A", "email": "a@example.com"})
    assert too_many.status_code == 400
    seats = f"{left} seat" + ("s" if left != 1 else "")
    assert page(too_many).errors[0] == (f"Only {seats} left in that session." if left
                                        else "That session is full.")


def test_unknown_pages_wrong_methods_and_missing_sessions(shop):
    client, server, _ = shop
    assert client.get("/nope").status_code == 404
    assert client.get("/product/nope").status_code == 404
    assert client.get("/cart/add").status_code == 404
    assert client.post("/search").status_code == 404
    with httpx.Client(base_url=server.base_url, trust_env=False) as anonymous:
        assert anonymous.get("/").status_code == 403
    big = client.post("/checkout", content=b"x" * (MAX_BODY + 1),
                      headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert big.status_code == 413
    json_post = client.post("/checkout", json={"full_name": "x"})
    assert json_post.status_code == 415


def test_sessions_are_isolated(shop):
    client, server, sid = shop
    other = server.open_session(0)
    try:
        p = product_with_sizes()
        client.post("/cart/add", data={"product": p.id, "color": p.colors[0], "size": p.sizes[0],
                                       "quantity": "1"})
        assert len(server.session_state(sid).cart) == 1
        assert server.session_state(other).cart == []
    finally:
        server.close_session(other)


def test_parser_elements_forms_labels_and_errors():
    html = """<!doctype html><html><head><title>T &amp; Co</title><style>p {}</style></head>
    <body><script>var x = "<a href=/x>no</a>";</script>
    <h2>Pick  one</h2><p class="error">Bad <b>thing</b>.</p>
    <ul><li><a href="/a">First</a> item</li><li><a href="/b"></a></li></ul>
    <table><tr><th>Name</th><th>Qty</th></tr><tr><td>Mug</td><td>2
      <form action="/rm" method="post"><input type="hidden" name="line" value="0">
      <button type="submit" name="go" value="1">Remove</button></form></td></tr></table>
    <form action="/f"><label for="c">Colour</label><select id="c" name="color">
      <option value="r">Red</option><option selected>Blue</option></select>
      <textarea name="note">hi there</textarea><input type="email" name="mail" placeholder="you@x">
      <input type="submit" value="Send"><button type="button">Noop</button></form></body></html>"""
    p = parse_page(html, "/x")
    assert p.title == "T & Co" and p.errors == ["Bad thing."]
    assert [e.kind for e in p.elements] == ["link", "link", "button", "select", "textbox",
                                            "textbox", "button", "button"]
    assert p.elements[1].label == "/b"  # an empty link is named by its target
    remove = p.element(3)
    assert (remove.name, remove.value, remove.form) == ("go", "1", 0)
    color = p.element(4)
    assert color.label == "Colour" and color.value == "Blue" and color.options[0] == ("r", "Red")
    assert p.forms[1].fields == [4, 5, 6] and p.forms[1].buttons == [7]
    assert p.element(8).form is None  # type=button submits nothing
    lines = p.lines({4: "r"})
    assert "## Pick one" in lines and '- [1] link "First" item' in lines
    assert 'Mug | 2 [3] button "Remove"' in lines
    assert any('[4] select "color" = "Red" (options: Red, Blue)' in line for line in lines)
    assert any('[6] textbox "mail" (you@x)' in line for line in lines)
    assert not any("no" == e.label for e in p.elements)  # script content is skipped
