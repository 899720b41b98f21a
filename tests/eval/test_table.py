from rich.console import Console

from trajforge.eval.table import html_report, rich_table

M = {"n": 4, "completion": 0.5, "completion_ci95": [0.15, 0.85], "validity": 1.0, "validity_ci95": [0.5, 1.0],
     "avg_turns": 2.25, "fail_reasons": {"wrong_answer": 2}}


def test_table_and_html_show_every_tier():
    results = {"tuned": dict(M, tiers={"easy": M, "hard": dict(M, completion=0.0)})}
    console = Console(record=True, width=200)
    console.print(rich_table(results, title="t"))
    text = console.export_text()
    assert "tuned" in text and "easy" in text and "hard" in text and "50%" in text and "15-85%" in text
    html = html_report(results, "Run <1>", extra={"timings (s)": {"train": 3}})
    assert "Run &lt;1&gt;" in html and "wrong_answer: 2" in html and html.count("<tr>") == 4


def test_the_table_fits_100_columns_with_every_header_whole():
    long_name = "hf:smollm2-135m@runs/x/adapter"  # 30 characters
    results = {long_name: dict(M, tiers={"easy": M, "medium": M, "hard": M}), "expert": M}
    console = Console(record=True, width=100)
    console.print(rich_table(results, title="heldout split (4 tasks)"))
    lines = console.export_text().splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 100
    header = next(line for line in lines if "policy" in line)
    assert header.split() == ["policy", "tier", "n", "completion", "95%", "CI", "validity", "95%", "CI", "avg",
                              "turns"]
    row = next(line for line in lines if long_name in line)  # the name and all its numbers on one line
    assert row.split() == [long_name, "all", "4", "50%", "15-85%", "100%", "50-100%", "2.25"]


def test_names_and_tiers_are_text_not_markup():
    """A policy ``base[v2]`` showed as ``base`` and ``run[/x]`` raised MarkupError (rich markup); a
    tier went into the HTML page unescaped."""
    results = {"base[v2]": dict(M, tiers={"<i>x</i>[b]": M}), "run[/x]": M}
    console = Console(record=True, width=200)
    console.print(rich_table(results))
    text = console.export_text()
    assert "base[v2]" in text and "run[/x]" in text and "<i>x</i>[b]" in text
    html = html_report(results, "t")
    assert "<i>" not in html and "&lt;i&gt;x&lt;/i&gt;[b]" in html
