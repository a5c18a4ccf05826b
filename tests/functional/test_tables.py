import math

import pytest

from relrep_hf.functional.markdown_tables import (
    format_cell,
    format_table,
    markdown_table,
    mean_std,
    summarize_seeds,
)


def test_markdown_table_escapes_pipes():
    assert markdown_table(["a", "b|c"], [[1, "x|y"]]).splitlines() == [
        "| a | b\\|c |",
        "| --- | --- |",
        "| 1 | x\\|y |",
    ]


def test_cells_numbers_summaries_and_blanks():
    assert format_cell(0.12345) == "12.35"
    assert format_cell(0.12345, scale=1.0, digits=4) == "0.1235"
    assert format_cell({"mean": 0.5, "std": 0.01}) == "50.00 ± 1.00"
    assert (
        format_cell(None) == "" and format_cell("PARAM") == "PARAM" and format_cell(3) == "300.00"
    )


def test_results_table_keys_default_to_the_non_value_fields():
    rows = [
        {"encoder": "a", "classifier": "a", "Abs.": 0.9, "PARAM-WIP": 0.8},
        {"encoder": "a", "classifier": "b", "PARAM-WIP": 0.75},
    ]
    lines = format_table(rows, ["Abs.", "PARAM-WIP"]).splitlines()
    assert lines[0] == "| encoder | classifier | Abs. | PARAM-WIP |"
    assert lines[2:] == ["| a | a | 90.00 | 80.00 |", "| a | b |  | 75.00 |"]


def test_grouped_seed_summaries_as_in_the_paper():
    seeds = [
        [
            {"Encoder": "a", "Classifier": "b", "F1": 0.5},
            {"Encoder": "a", "Classifier": "c", "F1": 0.7},
        ],
        [
            {"Encoder": "a", "Classifier": "b", "F1": 0.7},
            {"Encoder": "a", "Classifier": "c", "F1": 0.7},
        ],
    ]
    table = summarize_seeds(seeds, ("Encoder", "Classifier"), ("F1", "absent"))
    assert table[0]["F1"] == pytest.approx({"mean": 0.6, "std": math.sqrt(0.02)})
    assert "absent" not in table[0]
    text = format_table(table, ["F1"], keys=("Encoder", "Classifier"), group=True)
    assert text.splitlines()[2:] == ["| a | b | 60.00 ± 14.14 |", "|  | c | 70.00 ± 0.00 |"]
    assert mean_std([2.0]) == {"mean": 2.0, "std": 0.0}


def test_seed_summaries_refuse_misaligned_or_non_finite_rows():
    with pytest.raises(ValueError, match="same rows in the same order"):
        summarize_seeds([[{"k": 1, "v": 0.1}], [{"k": 2, "v": 0.1}]], ("k",), ("v",))
    with pytest.raises(ValueError, match="Non-finite v"):
        summarize_seeds([[{"k": 1, "v": float("nan")}]], ("k",), ("v",))
