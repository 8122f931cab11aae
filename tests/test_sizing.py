"""Sizing: SymPy counts vs built models vs rau's published table (docs/paper.md §10)."""

from __future__ import annotations

import math

import pytest
import sympy

from fruit.cli import main as fruit_main
from fruit.errors import FruitError
from fruit.models import (
    ARCHITECTURES,
    PAPER_VOCAB_SIZES,
    build_model,
    choose_d,
    num_parameters,
    parameter_count,
    parameter_count_expr,
    real_root,
)
from fruit.names import PAPER_ARCHITECTURES

# docs/paper.md §10.4, built in rau: architecture -> (real root, d, parameters) for V = 68.
QF_TABLE = {
    "Tf": (69.14, 68, 193_596),
    "Tf+Sup": (71.46, 72, 202_896),
    "Tf+Sup+Sup": (74.14, 76, 209_532),
    "Tf+Nd": (69.68, 68, 191_085),
    "Tf+Nd+Nd": (70.28, 72, 208_882),
    "RNN": (176.43, 176, 199_056),
    "RNN+Sup": (168.32, 168, 199_301),
    "RNN+Sup+R": (162.96, 163, 200_081),
    "RNN+Nd": (158.18, 158, 199_595),
    "RNN+Nd+R": (153.60, 154, 200_886),
    "LSTM": (89.55, 90, 201_960),
    "LSTM+Sup": (84.52, 85, 202_098),
    "LSTM+Sup+R": (79.99, 80, 200_063),
    "LSTM+Nd": (82.20, 82, 199_131),
    "LSTM+Nd+R": (78.21, 78, 199_084),
}

# docs/paper.md §10.5: d / parameters per task, columns in this task order.
OTHER_TASKS = [
    "question-formation-in-german",
    "tense-reinflection-with-do",
    "passivization",
    "question-formation-with-have",
    "tense-reinflection",
    "passivization-in-german",
]
OTHER_TABLE = """
Tf 68/196044 68/193664 68/192644 68/193596 68/195636 68/195364
Tf+Sup 72/205488 72/202968 72/201888 72/202896 72/205056 72/204768
Tf+Sup+Sup 72/191880 76/209608 76/208468 76/209532 72/191448 72/191160
Tf+Nd 68/193533 68/191153 68/190133 68/191085 68/193125 68/192853
Tf+Nd+Nd 68/191022 72/208954 72/207874 72/208882 68/190614 68/190342
RNN 174/200970 176/199232 178/200962 176/199056 174/199926 174/199230
RNN+Sup 166/200913 168/199469 169/199135 168/199301 166/199917 166/199253
RNN+Sup+R 159/198965 163/200294 164/199275 163/200081 160/199883 160/199043
RNN+Nd 156/200815 158/199753 159/199585 158/199595 156/199879 156/199255
RNN+Nd+R 150/199174 154/201085 155/200299 154/200886 151/200199 151/199415
LSTM 89/200784 90/202050 90/200700 90/201960 89/200250 89/199894
LSTM+Sup 84/200729 85/202183 85/200908 85/202098 84/200225 84/199889
LSTM+Sup+R 79/200354 80/200193 80/198243 80/200063 79/199580 79/199064
LSTM+Nd 82/202083 82/199213 82/197983 82/199131 82/201591 82/201263
LSTM+Nd+R 77/199118 78/199207 79/201754 78/199084 77/198386 77/197898
"""


def expected_table() -> dict[tuple[str, str], tuple[int, int]]:
    table = {("question-formation", a): (d, n) for a, (_, d, n) in QF_TABLE.items()}
    for line in OTHER_TABLE.strip().splitlines():
        arch, *cells = line.split()
        for task, cell in zip(OTHER_TASKS, cells):
            d, n = cell.split("/")
            table[(task, arch)] = (int(d), int(n))
    return table


# docs/paper.md §10.2: closed forms N(d) in d and V.
def closed_form(arch: str, d, V):
    return {
        "Tf": 40 * d**2 + (V + 59) * d,
        "Tf+Sup": 36 * d**2 + (V + 158) * d,
        "Tf+Sup+Sup": 32 * d**2 + (V + 257) * d,
        "Tf+Nd": 36 * d**2 + (V + 294) * d + 5,
        "Tf+Nd+Nd": 32 * d**2 + (V + 529) * d + 10,
        "RNN": 6 * d**2 + (V + 7) * d,
        "RNN+Sup": 6 * d**2 + (V + 110) * d + 53,
        "RNN+Sup+R": 6 * d**2 + (V + 160) * d + 50 * (V + 1) + 53,
        "RNN+Nd": 6 * d**2 + (V + 246) * d + 199,
        "RNN+Nd+R": 6 * d**2 + (V + 291) * d + 45 * (V + 1) + 199,
        "LSTM": 24 * d**2 + (V + 16) * d,
        "LSTM+Sup": 24 * d**2 + (V + 269) * d + 53,
        "LSTM+Sup+R": 24 * d**2 + (V + 469) * d + 50 * (V + 1) + 53,
        "LSTM+Nd": 24 * d**2 + (V + 390) * d + 199,
        "LSTM+Nd+R": 24 * d**2 + (V + 570) * d + 45 * (V + 1) + 199,
    }[arch]


def test_registry_has_the_fifteen_names():
    assert PAPER_ARCHITECTURES == tuple(QF_TABLE)
    assert tuple(ARCHITECTURES)[: len(PAPER_ARCHITECTURES)] == PAPER_ARCHITECTURES


def test_unknown_architecture_lists_valid_names():
    with pytest.raises(FruitError) as e:
        build_model("Tf+Stack", vocab_size=68)
    for name in ARCHITECTURES:
        assert name in str(e.value)


@pytest.mark.parametrize("arch", PAPER_ARCHITECTURES)
def test_expression_equals_closed_form(arch):
    d, V = sympy.symbols("d V")
    assert sympy.expand(parameter_count_expr(arch, d=d, V=V) - closed_form(arch, d, V)) == 0


@pytest.mark.parametrize("arch", PAPER_ARCHITECTURES)
def test_question_formation_table(arch):
    root, d, n = QF_TABLE[arch]
    assert choose_d(arch, 68) == d
    assert parameter_count(arch, d, 68) == n
    assert real_root(arch, 68) == pytest.approx(root, abs=0.006)


def test_every_task_and_architecture_matches_table_and_built_model():
    table = expected_table()
    assert len(table) == 7 * 15
    for (task, arch), (d, n) in table.items():
        V = PAPER_VOCAB_SIZES[task]
        assert choose_d(arch, V) == d, (task, arch)
        assert parameter_count(arch, d, V) == n, (task, arch)
        model = build_model(arch, vocab_size=V)
        assert model.d == d
        assert num_parameters(model) == n, (task, arch)


def _python_rule(arch: str, V: int) -> int:
    """rau's rule from the closed form with the quadratic formula in floats (oracle)."""
    heads = 4 if arch.startswith("Tf") else 1
    a, b, c = (
        float(x)
        for x in sympy.Poly(
            closed_form(arch, heads * sympy.Symbol("s"), V), sympy.Symbol("s")
        ).all_coeffs()
    )
    c -= 200_000
    root = (-b + math.sqrt(b * b - 4 * a * c)) / (2 * a)
    return heads * round(root)


def test_rounding_rule_over_many_vocabularies():
    # Includes the V where rounding the root and the closest count disagree (§10.3).
    for V in [*range(20, 130, 9), 42, 43, 47, 76, 77]:
        for arch in PAPER_ARCHITECTURES:
            assert choose_d(arch, V) == _python_rule(arch, V), (arch, V)


def test_exact_tie_rounds_half_to_even():
    # docs/paper.md §10.3: V = 88 for Tf+Nd+Nd is an exact tie (s* = 17.5) and gives 72.
    s = sympy.Symbol("s")
    roots = sympy.solve(closed_form("Tf+Nd+Nd", 4 * s, 88) - 200_000, s)
    assert sympy.Rational(35, 2) in roots
    assert choose_d("Tf+Nd+Nd", 88) == 72


def test_stack_sizes_are_options():
    # Sup with m = 10: a stack-attention layer is 4d² + (10 + 2m)d.
    d = 40
    expected = 4 * (8 * d**2 + 11 * d) + 4 * d**2 + 30 * d + (68 + 2) * d + 2 * d
    assert parameter_count("Tf+Sup", d, 68, sup_size=10) == expected
    for arch in ("Tf+Nd", "LSTM+Nd+R", "RNN+Sup"):
        opts = {"nd_states": 2, "nd_symbols": 4, "nd_size": 3, "sup_size": 7}
        model = build_model(arch, vocab_size=30, d=24, **opts)
        assert num_parameters(model) == parameter_count(arch, 24, 30, **opts)


def test_paper_vocab_sizes_match_published_files(datasets_dir):
    for task, V in PAPER_VOCAB_SIZES.items():
        types = set()
        for split in ("dev", "test", "gen"):
            for line in (datasets_dir / task / f"{split}.tsv").read_text().splitlines():
                types.update(line.split())
        assert len(types) == V, task


def test_fruit_sizes_command(capsys):
    assert fruit_main(["sizes", "--task", "question-formation"]) == 0
    out = capsys.readouterr().out
    for arch, (_, d, n) in QF_TABLE.items():
        assert f"{arch:<12} {d:>4} {n:>11,}" in out


def test_fruit_sizes_unknown_task(capsys):
    assert fruit_main(["sizes", "--task", "nope"]) == 2
    assert "question-formation" in capsys.readouterr().err


def test_fruit_sizes_counts_v_from_train_file(tmp_path, capsys):
    (tmp_path / "passivization").mkdir()
    (tmp_path / "passivization" / "train.tsv").write_text("a b c decl\ta b c\nd e quest\te d\n")
    assert fruit_main(["sizes", "--task", "passivization", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "V=7" in out
    assert f"{'Tf':<12} {choose_d('Tf', 7):>4}" in out
