"""A matplotlib Figure described as E2B's `chart` object.

Runs inside the Python kernel (loaded by kernel_startup.py), called by
the chart formatter when a figure is displayed, so it sees the live
artists before the inline backend closes the figure. The shapes follow
E2B's published chart types: line and scatter charts give points per
series, bars label/group/value, pies label/angle/radius, box plots their
five numbers and outliers; a figure with several axes is a "superchart"
of one chart per axes. Anything else is "unknown" with no elements.
What cannot be read is left out rather than guessed.
"""

import datetime
import math
import re

from matplotlib.collections import PathCollection
from matplotlib.container import BarContainer
from matplotlib.dates import DateConverter, num2date
from matplotlib.lines import Line2D
from matplotlib.patches import PathPatch, Wedge

# matplotlib registers a converter for datetimes that switches between the
# plain and the concise one (rcParams); both mean a date axis.
try:
    from matplotlib.dates import _SwitchableDateConverter as _SwitchableDate
except ImportError:  # pragma: no cover
    _SwitchableDate = DateConverter

_UNIT = re.compile(r"[(\[]([^()\[\]]+)[)\]]\s*$")


def _jsonable(v):
    """A plain JSON value: numpy scalars unwrapped, dates as ISO text, NaN → None."""
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        try:
            v = v.item()
        except (ValueError, AttributeError):
            pass
    if isinstance(v, (datetime.date, datetime.datetime)):
        return v.isoformat()
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int):
        return v
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    return f if math.isfinite(f) else None


def _unit(label):
    m = _UNIT.search(label or "")
    return m.group(1).strip() if m else None


def _series_label(artist):
    # matplotlib names unlabelled artists "_child0", "_container1": not a label.
    label = artist.get_label()
    return "" if not label or label.startswith("_") else str(label)


def _is_date_axis(axis):
    return isinstance(axis.get_converter() if hasattr(axis, "get_converter") else axis.converter,
                      (DateConverter, _SwitchableDate))


def _is_categorical(axis):
    return type(axis.units).__name__ == "UnitData"


def _scale(ax, axis, name):
    if _is_date_axis(axis):
        return "datetime"
    if _is_categorical(axis):
        return "categorical"
    return ax.get_xscale() if name == "x" else ax.get_yscale()


def _ticks(axis):
    ticks = list(axis.get_ticklocs())
    if _is_date_axis(axis):
        values = [num2date(t).isoformat() for t in ticks]
    else:
        values = [_jsonable(t) for t in ticks]
    labels = [t.get_text() for t in axis.get_ticklabels()]
    return values, labels


def _label_at(axis, pos):
    """The tick label nearest a position (a bar's or box's centre)."""
    locs = list(axis.get_ticklocs())
    texts = [t.get_text() for t in axis.get_ticklabels()]
    if locs and len(texts) == len(locs):
        i = min(range(len(locs)), key=lambda k: abs(locs[k] - pos))
        if abs(locs[i] - pos) < 0.5 and texts[i]:
            return texts[i]
    return str(_jsonable(pos))


def _base(ax, kind):
    return {"type": kind, "title": ax.get_title() or None}


def _planar(ax, kind):
    chart = _base(ax, kind)
    xl, yl = ax.get_xlabel(), ax.get_ylabel()
    chart.update(x_label=xl or None, y_label=yl or None, x_unit=_unit(xl), y_unit=_unit(yl))
    return chart


def _point_fields(ax, chart):
    for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
        values, labels = _ticks(axis)
        chart[name + "_ticks"] = values
        chart[name + "_tick_labels"] = labels
        chart[name + "_scale"] = _scale(ax, axis, name)


def _pie(ax, wedges):
    chart = _base(ax, "pie")
    # Wedge angles are stored as float32: 324 comes back as 323.9999914.
    chart["elements"] = [{"label": _series_label(w),
                          "angle": round(abs(float(w.theta2) - float(w.theta1)), 4),
                          "radius": _jsonable(w.r)} for w in wedges]
    return chart


def _bars(ax, containers):
    chart = _planar(ax, "bar")
    elements = []
    for c in containers:
        horizontal = getattr(c, "orientation", "vertical") == "horizontal"
        group = _series_label(c)
        for rect in c.patches:
            if horizontal:
                pos, value = rect.get_y() + rect.get_height() / 2, rect.get_width()
                label = _label_at(ax.yaxis, pos)
            else:
                pos, value = rect.get_x() + rect.get_width() / 2, rect.get_height()
                label = _label_at(ax.xaxis, pos)
            elements.append({"label": label, "group": group, "value": _jsonable(value)})
    chart["elements"] = elements
    return chart


def _box_outline(artist):
    """(left, right, q1, q3) of a box drawn by boxplot: a closed rectangle."""
    if isinstance(artist, Line2D):
        # The plotted numbers (dates and categories already converted).
        xs, ys = artist.get_xdata(orig=False), artist.get_ydata(orig=False)
    elif isinstance(artist, PathPatch):
        v = artist.get_path().vertices
        xs, ys = v[:, 0], v[:, 1]
    else:
        return None
    if len(xs) != 5 or len(set(map(float, xs))) != 2 or len(set(map(float, ys))) != 2:
        return None
    return float(min(xs)), float(max(xs)), float(min(ys)), float(max(ys))


def _boxes(ax):
    """Box plots read back from their artists (boxplot leaves no other record)."""
    outlines = [o for o in (_box_outline(a) for a in list(ax.lines) + list(ax.patches)) if o]
    if not outlines:
        return None
    elements = []
    for left, right, q1, q3 in outlines:
        centre = (left + right) / 2
        median, lo, hi, outliers = None, q1, q3, []
        for line in ax.lines:
            xs = [float(x) for x in line.get_xdata(orig=False)]
            ys = [float(y) for y in line.get_ydata(orig=False)]
            if not xs or not all(left <= x <= right for x in xs):
                continue
            marker_only = line.get_linestyle() in ("None", " ", "")
            if marker_only and line.get_marker() not in (None, "None"):
                outliers.extend(ys)
            elif len(xs) == 2 and ys[0] == ys[1] and q1 <= ys[0] <= q3 and xs[0] != xs[1]:
                median = ys[0] if median is None or xs[0] < xs[1] else median
            elif len(xs) == 2 and xs[0] == xs[1] == centre:
                lo, hi = min(lo, *ys), max(hi, *ys)
        elements.append({"label": _label_at(ax.xaxis, centre), "min": lo, "first_quartile": q1,
                         "median": median if median is not None else (q1 + q3) / 2,
                         "third_quartile": q3, "max": hi, "outliers": outliers})
    # boxplot called twice on the same positions (styles redrawn): keep one per box.
    seen, unique = set(), []
    for e in elements:
        key = (e["label"], e["first_quartile"], e["third_quartile"])
        if key not in seen:
            seen.add(key)
            unique.append(e)
    return unique


def _points(line_or_coll):
    if isinstance(line_or_coll, Line2D):
        xs, ys = line_or_coll.get_xdata(orig=True), line_or_coll.get_ydata(orig=True)
        return [[_jsonable(x), _jsonable(y)] for x, y in zip(xs, ys)]
    return [[_jsonable(x), _jsonable(y)] for x, y in line_or_coll.get_offsets()]


def axes_chart(ax):
    wedges = [p for p in ax.patches if isinstance(p, Wedge)]
    if wedges:
        return _pie(ax, wedges)
    boxes = _boxes(ax)
    if boxes:
        chart = _planar(ax, "box_and_whisker")
        chart["elements"] = boxes
        return chart
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    if bars:
        return _bars(ax, bars)
    scatters = [c for c in ax.collections if isinstance(c, PathCollection)]
    lines = [ln for ln in ax.lines if len(ln.get_xdata()) > 0]
    if scatters or lines:
        kind = "scatter" if scatters else "line"
        chart = _planar(ax, kind)
        _point_fields(ax, chart)
        chart["elements"] = [{"label": _series_label(s), "points": _points(s)}
                             for s in (scatters or lines)]
        return chart
    chart = _base(ax, "unknown")
    chart["elements"] = []
    return chart


def figure_chart(fig):
    """The chart of a figure, or None when it has nothing drawn."""
    axes = [ax for ax in fig.get_axes() if ax.get_visible()]
    if not axes:
        return None
    if len(axes) == 1:
        return axes_chart(axes[0])
    title = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) else None
    return {"type": "superchart", "title": title, "elements": [axes_chart(ax) for ax in axes]}
