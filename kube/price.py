"""Prices per hour: one integer type and one parser for every place a price is written.

A price is written in a catalogue (the kwok provider's ``Price``, the YAML form's
``pricePerHour``: a JSON or YAML number, as the provider's ``float64`` field takes it) or in a
node's ``kubeplace.io/price-per-hour`` annotation (text, as every annotation). Both are read by
:func:`parse_price` into a :data:`Price`: an integer of billionths of the currency per hour,
rounded to the nearest billionth (half to even), finite, at least 0 and at most
:data:`MAX_PRICE_PER_HOUR`, so that the costs the solvers sum over many nodes stay exact 64-bit
integers.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import NewType

from kubeplace.kube.errors import InputError

Price = NewType("Price", int)
"""Billionths of the currency per hour: 0.0190032385536 -> 19003239."""
PRICE_UNIT = 10**9
"""Billionths of the currency unit per hour in one unit per hour."""
MAX_PRICE_PER_HOUR = 10_000
"""The largest price per hour taken (10 000 currency units an hour, above any cloud's list price):
in billionths 10**13, so that the cost of 900 000 new or removed nodes still fits the solvers'
64-bit integer costs."""
MAX_PRICE = Price(MAX_PRICE_PER_HOUR * PRICE_UNIT)
_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
"""A JSON number, as an annotation's text must write a price (a negative one is then refused as
the catalogue's is)."""
EXPECTED = f"a price per hour, a number from 0 to {MAX_PRICE_PER_HOUR}"


def parse_price(raw: object, field: str, *, text: bool = False) -> Price:
    """A price per hour as a :data:`Price`; InputError naming ``field`` otherwise. ``raw`` is a
    JSON/YAML number (a catalogue; a string is refused, as the provider's float field refuses it),
    or with ``text`` the annotation's string (a JSON number as text: ``"0.0434"``)."""
    if text:
        if not isinstance(raw, str) or not _NUMBER.fullmatch(raw):
            raise InputError(f"{raw!r} is not a price per hour", field=field, expected=EXPECTED)
        exact = Decimal(raw)
    elif isinstance(raw, bool) or not isinstance(raw, (int, float)):
        shown = "missing price" if raw is None else f"{raw!r} is not a number"
        raise InputError(shown, field=field, expected=EXPECTED)
    else:
        exact = Decimal(raw) if isinstance(raw, int) else Decimal(repr(raw))
    if not exact.is_finite():
        raise InputError(f"{raw} is not a price per hour", field=field, expected=EXPECTED)
    if exact < 0:
        raise InputError(f"negative price {raw}", field=field, expected=EXPECTED)
    if exact > MAX_PRICE_PER_HOUR:
        raise InputError(f"price {raw} is above the largest price per hour kubeplace takes, {MAX_PRICE_PER_HOUR} "
                         f"(costs are summed as 64-bit integers of billionths)", field=field, expected=EXPECTED)
    return Price(int((exact * PRICE_UNIT).to_integral_value()))
