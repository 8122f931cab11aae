"""Drawing the figures (``fruit.reporting.charts`` writes them to files): the paper's bar
charts (per task, full and partial accuracy, hierarchical vs linear), ours against the
paper's cell by cell (``ours_vs_paper_figure``), and every pooled run of the cells with
two modes (``pooled_runs_figure``).

Bars are the table means with one-standard-deviation error bars, for the architectures whose
mean test full accuracy, as printed, is at least 0.900 (``bar_chart_data``). Colours follow
the paper's pgfplots styles (``green!40`` fill with ``green!60!black`` edges for the
hierarchical rule, the same in red for the linear rule).

Figures are ``matplotlib.figure.Figure`` objects built without pyplot, so nothing global is
touched; a notebook shows one with ``display(fig)``. Sizes are fixed (``FIG_WIDTH`` inches,
``ROW_HEIGHT`` inches per task plus ``TITLE_HEIGHT``, at ``DPI``) so the PNG's pixel size is
known in advance: ``figure_pixels(n_tasks)``.
"""

from __future__ import annotations

import math
from pathlib import Path

import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from fruit.io import atomic_open
from fruit.reporting.runs import ARCHITECTURE_ORDER, TASK_TITLES
from fruit.reporting.stats import COMPATIBILITY_LEVEL

FIG_WIDTH = 8.0  # inches
ROW_HEIGHT = 2.4  # inches per task
TITLE_HEIGHT = 0.6  # inches for the title and legend
DPI = 150

STYLE = {
    "hierarchical": {"fill": (0.6, 1.0, 0.6), "edge": (0.0, 0.6, 0.0), "label": "Hierarchical"},
    "linear": {"fill": (1.0, 0.6, 0.6), "edge": (0.6, 0.0, 0.0), "label": "Linear"},
}
YLABELS = {"full": "Full Accuracy", "partial": "Partial Accuracy"}


def figure_pixels(n_tasks: int) -> tuple[int, int]:
    """(width, height) in pixels of the PNG of a figure with ``n_tasks`` rows."""
    return round(FIG_WIDTH * DPI), round((ROW_HEIGHT * n_tasks + TITLE_HEIGHT) * DPI)


def _architectures(bars: list[dict]) -> list[str]:
    present = {b["architecture"] for b in bars}
    return [a for a in ARCHITECTURE_ORDER if a in present] + sorted(
        present - set(ARCHITECTURE_ORDER)
    )


def draw_bars(ax, bars: list[dict], accuracy: str, title: str) -> None:
    """Hierarchical (green) next to linear (red) bars of one task and one accuracy."""
    bars = [b for b in bars if b["accuracy"] == accuracy]
    archs = _architectures(bars)
    width = 0.38
    for k, rule in enumerate(("hierarchical", "linear")):
        style = STYLE[rule]
        by_arch = {b["architecture"]: b for b in bars if b["rule"] == rule}
        xs, means, stds = [], [], []
        for i, arch in enumerate(archs):
            b = by_arch.get(arch)
            if b is None or math.isnan(b["mean"]):
                continue
            xs.append(i + (k - 0.5) * width)
            means.append(b["mean"])
            stds.append(0.0 if math.isnan(b["std"]) else b["std"])
        ax.bar(
            xs,
            means,
            width,
            yerr=stds,
            color=style["fill"],
            edgecolor=style["edge"],
            linewidth=0.8,
            error_kw={"ecolor": style["edge"], "capsize": 2, "elinewidth": 0.8},
        )
    ax.set_ylim(0, 1)
    ax.set_ylabel(YLABELS[accuracy])
    ax.set_title(title, fontsize=9)
    ax.set_xticks(range(len(archs)), archs, rotation=20, ha="right", fontsize=8)
    ax.set_xlim(-0.6, max(len(archs), 1) - 0.4)
    if not archs:
        ax.text(
            0.5,
            0.5,
            "no architecture with mean test FA ≥ 0.900",
            ha="center",
            va="center",
            transform=ax.transAxes,
            fontsize=8,
        )
    sns.despine(ax=ax)


def bar_chart_figure(bars_by_task: dict[str, list[dict]], title: str) -> Figure:
    """One row per task (full accuracy left, partial right), a legend and a title line."""
    tasks = list(bars_by_task)
    width, height = FIG_WIDTH, ROW_HEIGHT * len(tasks) + TITLE_HEIGHT
    with sns.axes_style("ticks"):
        fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
        axes = fig.subplots(len(tasks), 2, squeeze=False)
        for row, task in zip(axes, tasks):
            for ax, accuracy in zip(row, ("full", "partial")):
                draw_bars(
                    ax, bars_by_task[task], accuracy, TASK_TITLES.get(task, task).capitalize()
                )
    handles = [
        Patch(facecolor=s["fill"], edgecolor=s["edge"], label=s["label"]) for s in STYLE.values()
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, frameon=False, fontsize=8)
    fig.suptitle(title, fontsize=10, x=0.02, ha="left")
    return fig


# No creation date in the PDF: figures made again from the same runs are the same bytes,
# so regenerating them leaves git clean.
_METADATA = {"png": None, "pdf": {"CreationDate": None}}


def save_figure(fig: Figure, stem: str | Path, description: str | None = None) -> list[Path]:
    """Write ``stem.png`` and ``stem.pdf`` atomically, at the figure's fixed size; the
    full provenance that does not fit a title (``description``: the profile's description,
    the code commits) goes into the files' metadata (PNG "Description", PDF "Subject")."""
    paths = []
    for ext in ("png", "pdf"):
        path = Path(f"{stem}.{ext}")
        metadata = dict(_METADATA[ext] or {})
        if description:
            metadata["Description" if ext == "png" else "Subject"] = description
        with atomic_open(path, "wb") as f:
            fig.savefig(f, format=ext, dpi=DPI, metadata=metadata or None)
        paths.append(path)
    return paths


# One marker per accuracy column in the ours-vs-paper picture: circles for full accuracy,
# squares for partial; filled for test and hierarchical, open for linear.
CELL_MARKERS = {
    ("full", "test"): ("o", "FA test", True),
    ("full", "hierarchical"): ("^", "FA hier.", True),
    ("full", "linear"): ("v", "FA linear", False),
    ("partial", "test"): ("D", "PA test", True),
    ("partial", "hierarchical"): ("s", "PA hier.", True),
    ("partial", "linear"): ("s", "PA linear", False),
}


def _differs(record: dict) -> bool:
    p = record.get("compatibility_p")
    return p is not None and p < COMPATIBILITY_LEVEL


def _close_groups(points: list[dict], distance: float = 0.05) -> list[list[dict]]:
    """The points in groups of ones within ``distance`` of the group's first (in both
    coordinates), so that a crowded spot gets one stack of labels."""
    groups: list[list[dict]] = []
    for r in sorted(points, key=lambda r: (-r["ours_mean"], r["paper_mean"])):
        for group in groups:
            first = group[0]
            if (
                abs(first["paper_mean"] - r["paper_mean"]) <= distance
                and abs(first["ours_mean"] - r["ours_mean"]) <= distance
            ):
                group.append(r)
                break
        else:
            groups.append([r])
    return groups


def ours_vs_paper_figure(
    records: list[dict], title: str, claims_of: dict[tuple, list[str]] | None = None
) -> Figure:
    """Our cell means against the paper's, both with ±1 std error bars, and the identity
    line: one point per (task, architecture, accuracy column), one colour per task and one
    marker per column (``CELL_MARKERS``), each with its legend. A point whose runs differ
    from the paper's (``compatibility_p`` below ``COMPATIBILITY_LEVEL``) gets a black ring
    and a label: its architecture, column and, from ``claims_of`` ((task, architecture,
    accuracy, column) -> claim ids), the claims that compare it.

    ``records`` are ``fruit.reporting.tables.comparison`` records; the log-ratio columns
    (another scale) are left out, and so are cells missing on either side."""
    points = [
        r
        for r in records
        if (r["accuracy"], r["column"]) in CELL_MARKERS
        and r["ours_mean"] is not None
        and r["paper_mean"] is not None
    ]
    tasks = list(dict.fromkeys(r["task"] for r in points))
    cells = [c for c in CELL_MARKERS if any((r["accuracy"], r["column"]) == c for r in points)]
    colours = dict(zip(tasks, sns.color_palette("colorblind", max(len(tasks), 1))))
    differing = [r for r in points if _differs(r)]
    with sns.axes_style("ticks"):
        fig = Figure(figsize=(5.5, 5.8), dpi=DPI, layout="constrained")
        ax = fig.subplots()
        ax.plot([0, 1], [0, 1], color="0.6", linewidth=0.8, zorder=0)
        for task in tasks:
            for cell in cells:
                mine = [
                    r for r in points if r["task"] == task and (r["accuracy"], r["column"]) == cell
                ]
                if not mine:
                    continue
                marker, _, filled = CELL_MARKERS[cell]
                ax.errorbar(
                    [r["paper_mean"] for r in mine],
                    [r["ours_mean"] for r in mine],
                    xerr=[r["paper_std"] or 0.0 for r in mine],
                    yerr=[r["ours_std"] or 0.0 for r in mine],
                    fmt=marker,
                    markersize=5,
                    markerfacecolor=colours[task] if filled else "white",
                    elinewidth=0.8,
                    capsize=2,
                    color=colours[task],
                )
        ax.scatter(
            [r["paper_mean"] for r in differing],
            [r["ours_mean"] for r in differing],
            s=140,
            facecolors="none",
            edgecolors="black",
            linewidths=1.0,
            zorder=3,
        )
        for group in _close_groups(differing):
            anchor = group[0]
            x, y = anchor["paper_mean"], anchor["ours_mean"]
            right = x > 0.7  # near the right edge: labels to the left of the point
            below = y > 0.15  # labels below the point, but inside the axes at the bottom
            for j, r in enumerate(group):
                claims = (claims_of or {}).get(
                    (r["task"], r["architecture"], r["accuracy"], r["column"]), []
                )
                text = f"{r['architecture']} {CELL_MARKERS[(r['accuracy'], r['column'])][1]}"
                if claims:
                    text += f" ({', '.join(claims)})"
                step = -9 * (j + 1) - 4 if below else 9 * (len(group) - j) - 2
                ax.annotate(
                    text,
                    (x, y),
                    xytext=(-10 if right else 10, step),
                    textcoords="offset points",
                    ha="right" if right else "left",
                    fontsize=7,
                    color=colours[r["task"]],
                    arrowprops=None if j else {"arrowstyle": "-", "color": "0.5", "lw": 0.5},
                )
        ax.set_xlim(-0.03, 1.03)
        ax.set_ylim(-0.03, 1.03)
        ax.set_aspect("equal")
        ax.set_xlabel("paper (mean of 5 runs, ±1 std)")
        ax.set_ylabel("ours (mean over final runs, ±1 std)")
        task_handles = [
            Line2D(
                [],
                [],
                linestyle="",
                marker="o",
                color=colours[t],
                label=TASK_TITLES.get(t, t).capitalize(),
            )
            for t in tasks
        ]
        cell_handles = [
            Line2D(
                [],
                [],
                linestyle="",
                marker=CELL_MARKERS[c][0],
                color="0.3",
                markerfacecolor="0.3" if CELL_MARKERS[c][2] else "white",
                label=CELL_MARKERS[c][1],
            )
            for c in cells
        ]
        if differing:
            cell_handles.append(
                Line2D(
                    [],
                    [],
                    linestyle="",
                    marker="o",
                    markersize=10,
                    markerfacecolor="none",
                    markeredgecolor="black",
                    label="differs from the paper's runs",
                )
            )
        ax.add_artist(ax.legend(handles=task_handles, loc="upper left", fontsize=8, frameon=False))
        ax.legend(handles=cell_handles, loc="lower right", fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=8, x=0.02, ha="left", wrap=True)
    return fig


# The pooled-runs picture: one dot per run, open for a search trial, filled for a final run.
PHASE_MARKERS = {
    "search": ("search trial (its own drawn setting)", False),
    "final": ("final run (a selected setting)", True),
}
COLUMN_TITLES = {
    ("full", "hierarchical"): "FA hier.",
    ("full", "linear"): "FA linear",
    ("full", "test"): "FA test",
    ("partial", "hierarchical"): "PA hier.",
    ("partial", "linear"): "PA linear",
    ("partial", "test"): "PA test",
}


def _spread(values: list[float], width: float = 0.28, close: float = 0.015) -> list[float]:
    """Horizontal offsets that keep runs with nearly equal values apart: the k-th of a run
    of close values (sorted) goes to an alternating side, within ±``width``."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    offsets = [0.0] * len(values)
    group: list[int] = []
    for i in order + [None]:
        if i is not None and group and values[i] - values[group[0]] <= close:
            group.append(i)
            continue
        step = min(0.06, 2 * width / max(len(group), 1))
        for k, j in enumerate(group):
            offsets[j] = (k - (len(group) - 1) / 2) * step
        group = [] if i is None else [i]
    return offsets


def pooled_runs_figure(panels: list[dict], title: str) -> Figure:
    """Every pooled run of the cells whose runs fall into two modes, one panel per (task,
    accuracy column): per architecture a dot per run (open: search trial, filled: final
    run), the modes' threshold as a dashed line, the paper's mean ±1 std beside, and the
    runs above the threshold counted by phase under the axis.

    ``panels``: dicts with ``task``, ``accuracy``, ``column``, ``threshold`` and
    ``cells``, a list of dicts with ``architecture``, ``runs`` ([(value, phase)]) and
    ``paper`` ((mean, std) or None)."""
    n = max(len(panels), 1)
    archs = list(dict.fromkeys(c["architecture"] for p in panels for c in p["cells"]))
    colours = dict(zip(archs, sns.color_palette("colorblind", max(len(archs), 1))))
    with sns.axes_style("ticks"):
        fig = Figure(figsize=(max(3.2 * n + 0.6, 6.0), 4.6), dpi=DPI, layout="constrained")
        axes = fig.subplots(1, n, squeeze=False)[0]
        for ax, panel in zip(axes, panels):
            cells = panel["cells"]
            threshold = panel["threshold"]
            for i, cell in enumerate(cells):
                values = [v for v, _ in cell["runs"]]
                offsets = _spread(values)
                colour = colours[cell["architecture"]]
                for (value, phase), dx in zip(cell["runs"], offsets):
                    filled = PHASE_MARKERS[phase][1]
                    ax.plot(
                        i + dx,
                        value,
                        "o",
                        markersize=5,
                        color=colour,
                        markerfacecolor=colour if filled else "white",
                        markeredgewidth=1.0,
                    )
                if cell["paper"] is not None:
                    mean, std = cell["paper"]
                    ax.errorbar(
                        i + 0.4, mean, yerr=std, fmt="D", color="black", markersize=4, capsize=3
                    )
                counts = []
                for phase in PHASE_MARKERS:
                    mine = [v for v, ph in cell["runs"] if ph == phase]
                    if mine:
                        short = "trials" if phase == "search" else "finals"
                        counts.append(f"{short} {sum(v > threshold for v in mine)}/{len(mine)}")
                ax.annotate(
                    "\n".join(counts),
                    (i, 0),
                    xycoords=("data", "axes fraction"),
                    xytext=(0, -26),
                    textcoords="offset points",
                    ha="center",
                    va="top",
                    fontsize=7,
                )
            ax.axhline(threshold, color="0.5", linestyle="--", linewidth=0.8)
            ax.set_xticks(range(len(cells)), [c["architecture"] for c in cells])
            ax.set_xlim(-0.6, len(cells) - 0.4)
            ax.set_ylim(-0.03, 1.03)
            key = (panel["accuracy"], panel["column"])
            ax.set_title(
                f"{TASK_TITLES.get(panel['task'], panel['task'])}: "
                f"{COLUMN_TITLES.get(key, ' '.join(key))}",
                fontsize=8,
            )
            ax.set_ylabel("accuracy of each run")
        handles = [
            Line2D(
                [],
                [],
                linestyle="",
                marker="o",
                color="0.3",
                markerfacecolor="0.3" if filled else "white",
                label=label,
            )
            for label, filled in PHASE_MARKERS.values()
        ]
        handles += [
            Line2D(
                [], [], linestyle="", marker="D", color="black", label="paper (mean of 5, ±1 std)"
            ),
            Line2D([], [], color="0.5", linestyle="--", label="between the two modes"),
        ]
        fig.legend(handles=handles, loc="outside lower center", ncols=2, fontsize=7, frameon=False)
    fig.suptitle(title, fontsize=8, x=0.02, ha="left", wrap=True)
    return fig
