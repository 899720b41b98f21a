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
