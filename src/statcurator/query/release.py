"""A release: the noisy answer of one DP query, with its intervals, mechanisms and cost.

``Release.table`` is an Arrow table with, for each noisy output column ``a``, the value ``a``
and its (1 - α) confidence interval ``a_low``, ``a_high``; group keys and constants have no
interval. ``cost`` is the privacy loss charged, ``mechanisms`` says per output column which
mechanism produced it, with what scale and what share of ε, and ``provenance`` records what
was asked, of what, by whom and when. A release renders as text and in Jupyter, and
round-trips through JSON (the ledger stores that JSON so that a replayed request returns the
very same answer).

>>> r = Release.from_dict({"columns": ["n", "n_low", "n_high"], "types": ["int64", "double",
...     "double"], "rows": [[12, 6.0, 18.0]], "cost": {"epsilon": "1/2"}, "alpha": 0.05,
...     "mechanisms": {"n": [{"measure": "n", "mechanism": "laplace", "epsilon": "1/2",
...                           "sensitivity": "1", "scale": "2"}]}, "provenance": {}})
>>> r.rows()
[{'n': 12, 'n_low': 6.0, 'n_high': 18.0}]
>>> r.epsilon_spent
Fraction(1, 2)
"""

from __future__ import annotations

import html
import json
import operator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import orjson

from ..core.measures import ZCDP, ApproxDP, PrivacyLoss, PureDP
from .postprocess import transpose

if TYPE_CHECKING:
    from .binding import BoundQuery
    from .postprocess import NoisyAnswer

__all__ = ["Release", "loss_to_dict", "loss_from_dict"]


def loss_to_dict(loss: PrivacyLoss) -> dict[str, str]:
    """A loss as exact strings: ``{"epsilon": "1/2"}``, plus ``delta`` or ``rho``."""
    if isinstance(loss, PureDP):
        return {"epsilon": str(loss.epsilon)}
    if isinstance(loss, ApproxDP):
        return {"epsilon": str(loss.epsilon), "delta": str(loss.delta)}
    if isinstance(loss, ZCDP):
        return {"rho": str(loss.rho)}
    raise TypeError(f"unknown loss {loss!r}")  # pragma: no cover


def loss_from_dict(d: dict[str, str]) -> PrivacyLoss:
    if "rho" in d:
        return ZCDP(Fraction(d["rho"]))
    if "delta" in d and Fraction(d["delta"]) != 0:
        return ApproxDP(Fraction(d["epsilon"]), Fraction(d["delta"]))
    return PureDP(Fraction(d["epsilon"]))


def _jsonable(v: Any) -> Any:
    t = type(v)
    if t is str or t is int or t is float or t is bool or v is None:  # most leaves: no ABC
        return v
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, Fraction):  # last: an ABC check
        return str(v)
    return v


def _fraction_text(v: Any) -> str:
    """orjson's hook for what it cannot write itself: a Fraction as its text."""
    if isinstance(v, Fraction):
        return str(v)
    raise TypeError(f"{type(v).__name__} is not JSON serializable")


@dataclass
class Release:
    """The noisy answer of one query (see the module docs)."""

    columns: list[str]
    types: list[str]
    data: list[list[Any]]
    cost: PrivacyLoss
    mechanisms: dict[str, list[dict[str, Any]]]
    provenance: dict[str, Any] = field(default_factory=dict)
    alpha: float = 0.05
    replayed: bool = False
    _table: Any = field(default=None, repr=False, compare=False)

    # -- construction -----------------------------------------------------------------
    @classmethod
    def build(cls, bound: BoundQuery, noisy: NoisyAnswer,
              provenance: dict[str, Any] | None = None) -> Release:
        """Assemble the release from the noisy answer (post-processing only)."""
        names, columns, noisy_flags, found = noisy.columns()
        types = [_column_type(c, f) for c, f in zip(columns, found, strict=True)]
        rows = transpose(columns)
        cq = bound.compiled
        mechanisms: dict[str, list[dict[str, Any]]] = {}
        for o, is_noisy in zip(cq.plan.outputs, noisy_flags, strict=True):
            if is_noisy:  # the output's aggregates and atoms, as the answer found them
                mechanisms[o.name] = [bound.infos[i].as_dict()
                                      for agg in noisy.aggregates(o.expr)
                                      for i in noisy.atom_index[agg].measures]
        if cq.selection is not None:
            info = bound.infos[cq.selection].as_dict()
            info["threshold"] = getattr(bound.mechanisms[cq.selection], "threshold", None)
            mechanisms["(groups)"] = [info]
        return cls(names, types, rows, bound.cost, mechanisms, dict(provenance or {}),
                   noisy.alpha)

    # -- views ------------------------------------------------------------------------
    @property
    def table(self) -> Any:
        """The answer as a ``pyarrow.Table``."""
        if self._table is None:
            import pyarrow as pa

            arrays = []
            for j, t in enumerate(self.types):
                values = [r[j] for r in self.data]
                if t == "string":
                    values = [None if v is None else str(v) for v in values]
                elif t == "double":  # noisy integers beyond int64 are shown as doubles
                    values = [None if v is None else float(v) for v in values]
                arrays.append(pa.array(values, type=_arrow_type(t)))
            self._table = pa.Table.from_arrays(arrays, names=self.columns) if self.columns \
                else pa.table({})
        return self._table

    def to_pandas(self) -> Any:
        return self.table.to_pandas()

    def to_polars(self) -> Any:
        """The answer as a Polars DataFrame (needs the ``polars`` extra)."""
        try:
            import polars as pl
        except ImportError:
            from ..core.errors import DataError

            raise DataError("to_polars() needs the polars package, which is not installed",
                            remedy="pip install 'statcurator[polars]' (or use to_pandas() or "
                                   "the Arrow table .table)") from None
        return pl.from_arrow(self.table)

    def rows(self) -> list[dict[str, Any]]:
        """The answer as a list of dicts (one per output row)."""
        return [dict(zip(self.columns, r, strict=True)) for r in self.data]

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, column: str) -> list[Any]:
        j = self.columns.index(column)
        return [r[j] for r in self.data]

    @property
    def epsilon_spent(self) -> Fraction:
        return getattr(self.cost, "epsilon", Fraction(0))

    @property
    def delta_spent(self) -> Fraction:
        return getattr(self.cost, "delta", Fraction(0))

    # -- serialization ----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"columns": self.columns, "types": self.types, "rows": self.data,
                "cost": loss_to_dict(self.cost), "alpha": self.alpha,
                "mechanisms": _jsonable(self.mechanisms),
                "provenance": _jsonable(self.provenance)}

    def to_json(self) -> str:
        """The release as JSON (what the ledger stores for replays). orjson writes it several
        times faster on many groups, but writes NaN and ±∞ as null: whenever its output has
        more nulls than the release has NULLs, the standard library writes it instead (NaN
        and Infinity kept).

        >>> r = Release(["x"], ["double"], [[float("nan")], [1.5]], PureDP(1), {})
        >>> r.to_json().split(', "cost"')[0]
        '{"columns": ["x"], "types": ["double"], "rows": [[NaN], [1.5]]'
        >>> Release.from_json(Release(["x"], ["double"], [[2.5]], PureDP(1), {}).to_json()).data
        [[2.5]]
        """
        d = {"columns": self.columns, "types": self.types, "rows": self.data,
             "cost": loss_to_dict(self.cost), "alpha": self.alpha,
             "mechanisms": self.mechanisms, "provenance": self.provenance}
        try:  # orjson writes Fractions as text through _fraction_text, without a copy
            fast = orjson.dumps(d, default=_fraction_text)
        except (orjson.JSONEncodeError, TypeError):  # an integer beyond 64 bits, say
            fast = None
        if fast is not None:
            # each None is one null; a NaN, ±∞ (or a string with "null" in it) one more. The
            # rows are the bulk of the release: when the other parts' Nones account for
            # every null, the rows' text has none, so they hold no None and are not read
            nulls = fast.count(b"null")
            nones = _nones([self.columns, self.types, d["cost"], self.alpha, self.mechanisms,
                            self.provenance])
            if nulls == nones or nulls == nones + sum(map(_COUNT_NONE, self.data)):
                return fast.decode("utf-8")
        d["mechanisms"], d["provenance"] = _jsonable(self.mechanisms), _jsonable(self.provenance)
        return json.dumps(d, ensure_ascii=False, allow_nan=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, replayed: bool = False) -> Release:
        return cls(list(d["columns"]), list(d["types"]), [list(r) for r in d["rows"]],
                   loss_from_dict(d["cost"]), d.get("mechanisms", {}), d.get("provenance", {}),
                   float(d.get("alpha", 0.05)), replayed)

    @classmethod
    def from_json(cls, text: str, *, replayed: bool = False) -> Release:
        return cls.from_dict(json.loads(text), replayed=replayed)

    # -- rendering --------------------------------------------------------------------
    def _header(self) -> str:
        conf = f"{(1 - self.alpha) * 100:g}%"
        return (f"DP release: {len(self.data)} row(s), cost {self.cost}; intervals at {conf}"
                + (" (replayed: no new cost)" if self.replayed else ""))

    def display(self) -> tuple[list[str], list[list[str]]]:
        """Column headings and formatted cells (a value and its interval per noisy output),
        as the text, HTML and CLI renderings show them."""
        heads, cells = [], []
        shown = [c for c in self.columns
                 if not (c.endswith("_low") and c[:-4] + "_high" in self.columns
                         and c[:-4] in self.columns)
                 and not (c.endswith("_high") and c[:-5] in self.columns
                          and c[:-5] + "_low" in self.columns)]
        for c in shown:
            heads.append(c)
            if c + "_low" in self.columns:
                heads.append(f"{c} interval")
        for r in self.rows():
            row = []
            for c in shown:
                row.append(_fmt(r[c]))
                if c + "_low" in self.columns:
                    lo, hi = r[c + "_low"], r[c + "_high"]
                    row.append("" if lo is None else f"[{_fmt(lo)}, {_fmt(hi)}]")
            cells.append(row)
        return heads, cells

    def mechanism_lines(self) -> list[str]:
        out = []
        for col, infos in self.mechanisms.items():
            for info in infos:
                scale = info.get("scale")
                scale_s = f", scale {_fmt(_num(scale))}" if scale is not None else ""
                label = info.get("measure", col)
                label = label if label.startswith(col) else f"{col}: {label}"
                share = (f"ρ={_fmt(_num(info['rho']))}" if info.get("epsilon") is None
                         and info.get("rho") is not None else
                         f"ε={_fmt(_num(info['epsilon']))}")  # zCDP (Gaussian) or ε
                out.append(f"{label} — {info['mechanism']}, {share}{scale_s}")
        return out

    def __str__(self) -> str:
        heads, cells = self.display()
        widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(heads)]
        lines = [self._header(),
                 "  ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True)),
                 "  ".join("-" * w for w in widths)]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
        lines += ["mechanisms:"] + ["  " + m for m in self.mechanism_lines()]
        if self.provenance.get("post_processing"):
            lines.append(f"post-processing: {self.provenance['post_processing']}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Release {len(self.data)} rows, columns={self.columns}, cost {self.cost}>"

    def _repr_html_(self) -> str:
        heads, cells = self.display()
        e = html.escape
        head = "".join(f"<th>{e(h)}</th>" for h in heads)
        body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>" for r in cells)
        mech = "".join(f"<li>{e(m)}</li>" for m in self.mechanism_lines())
        return (f"<div><p><b>{e(self._header())}</b></p><table><thead><tr>{head}</tr></thead>"
                f"<tbody>{body}</tbody></table><ul>{mech}</ul></div>")


def _num(x: Any) -> Any:
    if isinstance(x, str):
        try:
            return Fraction(x)
        except ValueError:
            return x
    return x


def _fmt(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, Fraction):
        v = float(v)
    if isinstance(v, float):
        return f"{v:.6g}" if abs(v) < 1e15 else f"{v:.6e}"
    return str(v)


_COUNT_NONE = operator.methodcaller("count", None)
#: the containers _nones looks into (exactly these types: a subclass is a value)
_NESTED = frozenset({dict, list, tuple})


def _nones(v: Any) -> int:
    """How many None values ``v`` holds (nested lists, tuples and dicts; subclasses of them
    are values): one loop over a stack of the containers, each value looked at where it is
    found. A container that holds itself would never end; :meth:`Release.to_json` calls
    this only after orjson has written the value, which refuses such a cycle.

    >>> _nones([None, {"a": None, "b": [1, None, (None,)]}, "null", 0.0])
    4
    """
    n = 0
    stack: list[Any] = [[v]]
    pop, push = stack.pop, stack.append
    while stack:
        x = pop()
        for y in x.values() if type(x) is dict else x:
            if y is None:
                n += 1
            elif type(y) in _NESTED:
                push(y)
    return n


#: a column of these types only is a column of doubles
_DOUBLES = frozenset({float, type(None)})


def _column_type(column: list[Any], found: set[type] | None = None) -> str:
    """The Arrow type of one released column, from the Python types of its values
    (``found``, when the post-processing already knows them, else read here)."""
    if found is None:
        found = set(map(type, column))
    if found <= _DOUBLES:  # the most common column, decided without the kinds below
        return "double"
    nulls = type(None) in found
    kinds = {_kind(t) for t in found if t is not type(None)}  # a value's kind is its type's
    if not kinds or kinds == {float}:
        return "double"
    if kinds == {bool}:
        return "bool"
    if kinds == {int}:
        vals = [v for v in column if v is not None] if nulls else column
        return "int64" if min(vals) >= -(2**63) and max(vals) < 2**63 else "double"
    if kinds <= {int, float}:
        return "double"
    return "string"  # strings, or a mixture (keys of CASE branches of several types)


def _kind(cls: type) -> type:
    """bool, int, float or str for those types and their subclasses (numpy's float64 is a
    float), else the type itself."""
    for t in (bool, int, float, str):
        if issubclass(cls, t):
            return t
    return cls


def _arrow_type(t: str) -> Any:
    import pyarrow as pa

    return {"int64": pa.int64(), "double": pa.float64(), "string": pa.string(),
            "bool": pa.bool_()}[t]
