"""The web environment's site: a seeded shop with classes, served over loopback HTTP.

``catalog`` (products, classes, the signed-in account from a seed), ``state`` (per-session cart,
orders, bookings and the actions that change them), ``site`` (routing and HTML pages),
``server`` (one ThreadingHTTPServer per process, sessions by cookie), ``page`` (HTML → numbered
text for the agent's browser), ``goals`` (what a task wants placed, and how to check it).
"""
