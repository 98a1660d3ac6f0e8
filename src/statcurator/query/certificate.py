"""Release certificates (Kerckhoffs): everything needed to reproduce a DP release's analysis
except the random bits, as plain JSON.

A certificate states the query and its plan, the privacy unit and neighbour relation, the
contribution bounds the engine enforces, the joins and their public multiplicities, and for
every measurement: the engine term it reads (with the clamp of the aggregated value, in the
engine's integers, and the grid step that turns them into values), the mechanism with its
sensitivity, scale, grid and share of the budget. The curator adds the cost, the ledger entry
that charged it, the software version, and the result of the independent re-check
(:mod:`.recheck`), which derives the cost again from the certificate alone and refuses the
release when the compiler's is lower.

>>> import pyarrow as pa
>>> from statcurator.core.schema import Column, TableMeta
>>> from statcurator.query.catalog import DictCatalog, TableInfo
>>> from statcurator.query.compiler import compile_query
>>> from statcurator.query.sql import parse_sql
>>> from statcurator.query.binding import BoundQuery
>>> meta = TableMeta("t", (Column("age", type="integer", bounds=(0, 100)),))
>>> cat = DictCatalog({"t": TableInfo.from_schema("t", meta, pa.schema([("age", pa.int64())]))})
>>> bound = BoundQuery(compile_query(parse_sql("SELECT SUM(age) FROM t", cat), cat), 1)
>>> cert = certificate(bound, meta)
>>> cert["measurements"][0]["clamp"], cert["measurements"][0]["sensitivity"]
([0, 100], '100')
>>> from statcurator.query.recheck import recheck
>>> recheck(cert).epsilon
Fraction(1, 1)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..core.schema import TableMeta
from .aggregates import MeasureRole
from .binding import BoundQuery
from .expr import Col
from .plan import Filter, Join, Relation
from .relational import Quantized
from .release import loss_to_dict

__all__ = ["certificate", "certify", "FORMAT", "loss_dict", "unit_dict"]

#: a privacy loss as exact text (``{"epsilon"}``, with ``delta`` or as ``{"rho"}``)
loss_dict = loss_to_dict

FORMAT = "statcurator-certificate/1"


def _s(x: Any) -> str | None:
    return None if x is None else str(x)


def unit_dict(unit: Any) -> dict[str, Any]:
    """A privacy unit as the certificate states it (what the re-check reads)."""
    return {"column": unit.column, "max_rows": unit.max_rows, "max_groups": unit.max_groups,
            "group_size": unit.group_size}


def _joins(rel: Relation) -> Iterator[Join]:
    while isinstance(rel, Filter):
        rel = rel.input
    if isinstance(rel, Join):
        yield from _joins(rel.left)
        yield rel


def _filtered(rel: Relation) -> bool:
    """Whether the relation drops rows by a predicate anywhere (WHERE or a filtered join)."""
    if isinstance(rel, Filter):
        return True
    return _filtered(rel.left) if isinstance(rel, Join) else False


def _clamp(q: Any) -> list[int] | None:
    return [q.lq, q.uq] if isinstance(q, Quantized) else None


def certificate(bound: BoundQuery, meta: TableMeta, catalog: Any = None) -> dict[str, Any]:
    """The certificate of the release ``bound`` would make (everything but the noise, the
    cost, the ledger entry and the re-check, which the curator adds)."""
    from .. import __version__

    cq = bound.compiled
    ep = cq.engine_plan
    unit = meta.privacy_unit
    joins = []
    for j in _joins(cq.plan.relation):
        cols = tuple(b.name for _, b in j.on if isinstance(b, Col))
        stated = catalog.table_info(j.right.table).max_multiplicity(cols) \
            if catalog is not None else cq.stability
        joins.append({"table": j.right.table, "kind": j.kind, "columns": list(cols),
                      "multiplicity": int(stated)})
    measurements = []
    for m, info, obj in zip(bound.measures, bound.infos, bound.mechanisms, strict=True):
        d: dict[str, Any] = {
            "label": m.label, "role": str(m.role), "mechanism": info.mechanism,
            "epsilon": _s(info.epsilon), "delta": _s(info.delta), "rho": _s(info.rho),
            "sensitivity": _s(info.sensitivity), "scale": _s(info.scale), "grid": _s(info.grid),
            "value_scale": _s(m.value_scale), "integral": m.integral,
        }
        if m.role == MeasureRole.QUANTILE:
            h = ep.histograms[m.index]
            assert m.p is not None
            # the scores are integers: the textbook score (#below + #at/2 − p·n for the
            # point, a rank distance for an interval end) times this public unit
            score_unit = (2 if m.side is None else 1) * m.p.denominator
            d.update(term="histogram", clamp=_clamp(h.input), bins=h.bins, p=str(m.p),
                     side=m.side, score_unit=score_unit, expression=h.input.expr.sql())
            if bound.zcdp:
                d["rho"] = str(info.epsilon * info.epsilon / 2)  # type: ignore[operator]
        else:
            t = ep.terms[m.index]
            d.update(term=t.kind, clamp=_clamp(t.input), clamp2=_clamp(t.input2),
                     expression=(t.input.expr.sql() if isinstance(t.input, Quantized)
                                 else t.input.sql() if t.input is not None else None))
            if isinstance(t.input, Quantized):
                d.update(step=str(t.input.scale), input_integral=t.input.integral,
                         column=(t.input.expr.name if isinstance(t.input.expr, Col)
                                 and t.input2 is None else None))
            if m.role == MeasureRole.SELECTION:
                d["max_partitions"] = obj.max_partitions
        measurements.append(d)
    return {
        "format": FORMAT,
        "statcurator": __version__,
        "query": cq.text or cq.plan.sql(),
        "plan": cq.plan.sql(),
        "dataset": cq.table,
        "privacy_unit": unit_dict(unit),
        "neighbours": str(meta.neighbours),
        "declared_rows": meta.rows,
        "grouped": bool(cq.plan.group_by),
        "group_keys": ("none" if not cq.plan.group_by else
                       "public key sets" if cq.public_keys else "partition selection"),
        "bounding": (None if ep.bounding is None else
                     {"unit": ep.bounding.unit.name, "max_rows": ep.bounding.max_rows,
                      "max_groups": ep.bounding.max_groups}),
        "joins": joins,
        "filtered": _filtered(cq.plan.relation),
        "policy": (None if cq.policy is None else
                   {"column": cq.policy[0], **cq.policy[1].to_spec()}),
        "measurements": measurements,
        "cost": loss_dict(bound.cost),
        "notes": list(cq.notes),
    }


def certify(bound: BoundQuery, meta: TableMeta, catalog: Any = None) -> dict[str, Any]:
    """The certificate with the independent re-check's verdict; refuses (nothing charged,
    nothing released) when the re-check derives a larger cost than the compiler charges.

    >>> import pyarrow as pa
    >>> from statcurator.core.schema import Column, TableMeta
    >>> from statcurator.query.catalog import DictCatalog, TableInfo
    >>> from statcurator.query.compiler import compile_query
    >>> from statcurator.query.sql import parse_sql
    >>> meta = TableMeta("t", (Column("x", type="real", bounds=(-1, 3)),))
    >>> cat = DictCatalog({"t": TableInfo.from_schema("t", meta, pa.schema([("x", pa.float64())]))})
    >>> q = compile_query(parse_sql("SELECT AVG(x) FROM t", cat), cat)
    >>> certify(BoundQuery(q, 1), meta, cat)["recheck"]["passed"]
    True
    """
    from ..core.errors import PrivacyAccountingError
    from .recheck import exceeds, recheck

    cert = certificate(bound, meta, catalog)

    def multiplicity(table: str, columns: tuple[str, ...]) -> int:
        # numeric keys compared as doubles (which can only merge values: never fewer repeats)
        info = catalog.table_info(table)
        doubles = tuple(info.kind(c) in ("integer", "real") for c in columns)
        return int(info.max_multiplicity(columns, doubles))

    derived = recheck(cert, multiplicity if catalog is not None else None)
    problems = list(derived.problems) + exceeds(derived, cert["cost"])
    cert["recheck"] = {**derived.as_dict(), "passed": not problems, "problems": problems}
    if problems:
        raise PrivacyAccountingError(
            "the independent re-check of this release's cost disagrees with the compiler: "
            + "; ".join(problems),
            remedy="this is a defect of statcurator: nothing was charged or released; report "
                   "the query and its metadata")
    return cert
