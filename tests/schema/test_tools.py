from typing import Literal

import pytest

from trajforge.schema import ToolSpec, Toolset


def search(city: str, max_price: float, cabin: Literal["economy", "business"] = "economy",
           tags: list[str] | None = None) -> str:
    """Search flights from a city.

    Args:
        city: Departure city.
        max_price: Highest price in USD,
            inclusive.
        cabin: Cabin class.
        tags: Optional labels.

    Returns:
        Matching flights.
    """
    return ""


def test_spec_from_function():
    spec = ToolSpec.from_function(search)
    assert spec.name == "search"
    assert spec.description == "Search flights from a city."
    props = spec.parameters["properties"]
    assert props["city"] == {"type": "string", "description": "Departure city."}
    assert props["max_price"]["type"] == "number"
    assert props["max_price"]["description"] == "Highest price in USD, inclusive."
    assert props["cabin"]["enum"] == ["economy", "business"]
    assert props["tags"]["type"] == "array" and props["tags"]["items"] == {"type": "string"}
    assert spec.parameters["required"] == ["city", "max_price"]
    assert spec.parameters["additionalProperties"] is False


def test_untyped_parameter_is_refused():
    def bad(x):
        """Bad."""

    with pytest.raises(TypeError, match="no type annotation"):
        ToolSpec.from_function(bad)


def test_fingerprint_stable_and_sensitive():
    a = ToolSpec.from_function(search)
    b = ToolSpec(name="other", description="Other tool.")
    assert Toolset(tools=(a, b)).fingerprint == Toolset(tools=(b, a)).fingerprint
    changed = a.model_copy(update={"description": "Search flights."})
    assert Toolset(tools=(changed, b)).fingerprint != Toolset(tools=(a, b)).fingerprint
    assert len(Toolset(tools=(a,)).fingerprint) == 16


def test_openai_roundtrip():
    ts = Toolset(tools=(ToolSpec.from_function(search),))
    assert Toolset.from_openai(ts.openai()) == ts
    with pytest.raises(ValueError, match=r"tools\[0\]"):
        Toolset.from_openai([{"type": "function", "function": {"description": "x"}}])
