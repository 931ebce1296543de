"""Exact privacy amounts and per-analyst budgets.

Amounts are held as whole nano-units (10⁻⁹) in a Python ``int``, so sums are exact: ten
charges of ε=0.1 add up to exactly ε=1, and comparisons never suffer from float rounding.
Values with more than nine decimals are rounded *up* to the next nano-unit, which is the
conservative direction for a cost; a budget set by an admin or the configuration goes
through :func:`budget_epsilon`, which refuses such values instead of enlarging the budget.

:class:`Epsilon` and the zCDP :class:`Rho` are both :class:`NanoAmount` (same arithmetic, a
different symbol, never mixed by accident). How ε and ρ charges add up to an (ε, δ)
guarantee is in ``accountant.zcdp``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import MAX_EMAX, MIN_EMIN, ROUND_FLOOR, Context, Decimal, InvalidOperation
from enum import StrEnum
from typing import Any, ClassVar, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from accountant.errors import InvalidAmount

NANO_PER_UNIT = 10**9
#: No single amount (cost or total) may exceed this: far beyond any meaningful DP budget,
#: and it keeps every sum well inside SQLite's 64-bit integers.
MAX_UNITS = 10**6

AmountInput = str | int | float | Decimal


class NanoAmount:
    """A non-negative privacy amount, exact to 10⁻⁹. Immutable, hashable, totally ordered.

    Construct from ``str``, ``int``, ``float`` (via ``Decimal(str(x))``, so ``0.1`` means
    exactly 0.1) or ``Decimal``. Negative, NaN, infinite and absurdly large values raise
    :class:`~accountant.errors.InvalidAmount`. Only amounts of the same type combine.
    """

    __slots__ = ("_nano",)
    SYMBOL: ClassVar[str] = "?"
    _nano: int

    def __init__(self, value: AmountInput | Self) -> None:
        nano = value._nano if isinstance(value, NanoAmount) else self._parse(value)
        object.__setattr__(self, "_nano", nano)

    @classmethod
    def _parse(cls, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
            raise InvalidAmount(
                f"{cls.SYMBOL} must be a number such as 0.5, not {type(value).__name__}"
            )
        if isinstance(value, str) and "_" in value:  # Decimal would read 0_5 as 5
            raise InvalidAmount(f"{cls.SYMBOL} must be a number such as 0.5, not {value!r}")
        try:
            exact = (
                Decimal(str(value).strip()) if isinstance(value, str | float) else Decimal(value)
            )
        except InvalidOperation:
            raise InvalidAmount(
                f"{cls.SYMBOL} must be a number such as 0.5, not {value!r}"
            ) from None
        if not exact.is_finite():
            raise InvalidAmount(f"{cls.SYMBOL} must be a finite number, not {value!r}")
        if exact < 0:
            raise InvalidAmount(f"{cls.SYMBOL} cannot be negative (got {value!r})")
        if exact > MAX_UNITS:
            raise InvalidAmount(f"{cls.SYMBOL}={value!r} is too large; the maximum is {MAX_UNITS}")
        return ceil_scaled(exact, 9)

    @classmethod
    def from_nano(cls, nano: int) -> Self:
        """The amount ``nano`` × 10⁻⁹ (as stored in the ledger)."""
        if isinstance(nano, bool) or not isinstance(nano, int) or nano < 0:
            raise InvalidAmount(
                f"a stored {cls.SYMBOL} must be a non-negative integer of nano-units"
            )
        if nano > MAX_UNITS * NANO_PER_UNIT:
            raise InvalidAmount(f"a stored {cls.SYMBOL} is too large; the maximum is {MAX_UNITS}")
        amount = cls.__new__(cls)
        object.__setattr__(amount, "_nano", nano)
        return amount

    @classmethod
    def zero(cls) -> Self:
        return cls.from_nano(0)

    @property
    def nano(self) -> int:
        """The amount in whole nano-units (10⁻⁹)."""
        return self._nano

    def as_decimal(self) -> Decimal:
        """The exact value as a Decimal."""
        return Decimal(self._nano).scaleb(-9)

    @property
    def plain(self) -> str:
        """The exact value without the symbol and without trailing zeros: ``"0.5"``, ``"10"``."""
        return format(self.as_decimal().normalize(), "f")

    def is_zero(self) -> bool:
        return self._nano == 0

    def __str__(self) -> str:
        return f"{self.SYMBOL}={self.plain}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}('{self.plain}')"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec) if spec else str(self)

    def __float__(self) -> float:
        return self._nano / NANO_PER_UNIT

    # -- arithmetic --------------------------------------------------------------------

    def _other(self, other: object) -> int | None:
        if isinstance(other, NanoAmount) and type(other) is type(self):
            return other._nano
        return None

    def __add__(self, other: Self) -> Self:
        nano = self._other(other)
        if nano is None:
            return NotImplemented
        return self._result(self._nano + nano, f"{self} + {other}", f"add at most {self._room}")

    def __radd__(self, other: object) -> Self:
        # Lets ``sum(amounts, start=Epsilon.zero())`` and ``sum(amounts)`` both work.
        if isinstance(other, int) and not isinstance(other, bool) and other == 0:
            return self
        return NotImplemented

    def __sub__(self, other: Self) -> Self:
        """Difference; raises InvalidAmount if ``other`` is larger (use :meth:`saturating_sub`)."""
        nano = self._other(other)
        if nano is None:
            return NotImplemented
        if nano > self._nano:
            raise InvalidAmount(
                f"cannot subtract {other} from {self}: the result would be negative"
            )
        return type(self).from_nano(self._nano - nano)

    def saturating_sub(self, other: Self) -> Self:
        """``self - other``, or zero if ``other`` is larger (e.g. remaining after overspend)."""
        return type(self).from_nano(max(self._nano - other.nano, 0))

    def __mul__(self, times: int) -> Self:
        """``k × amount`` for a whole number ``k ≥ 0`` (k-fold composition)."""
        if isinstance(times, bool) or not isinstance(times, int):
            return NotImplemented
        if times < 0:
            raise InvalidAmount(f"cannot multiply {self} by a negative number ({times})")
        return self._result(self._nano * times, f"{times} × {self}", "use a smaller amount")

    def _result(self, nano: int, what: str, fix: str) -> Self:
        """The amount ``nano`` (the result of ``what``), or InvalidAmount saying the limit
        and what to do (``fix``) if it is more than any amount may be."""
        if nano > MAX_UNITS * NANO_PER_UNIT:
            shown = format(Decimal(nano).scaleb(-9).normalize(), "f")
            raise InvalidAmount(
                f"{what} would be {self.SYMBOL}={shown}, more than the largest {self.SYMBOL} "
                f"dpproxy keeps ({MAX_UNITS}, far beyond any meaningful budget); {fix}"
            )
        return type(self).from_nano(nano)

    @property
    def _room(self) -> Self:
        """How much more this amount could grow (to MAX_UNITS)."""
        return type(self).from_nano(max(MAX_UNITS * NANO_PER_UNIT - self._nano, 0))

    __rmul__ = __mul__

    def __eq__(self, other: object) -> bool:
        nano = self._other(other)
        return NotImplemented if nano is None else self._nano == nano

    def __lt__(self, other: Self) -> bool:
        nano = self._other(other)
        return NotImplemented if nano is None else self._nano < nano

    def __le__(self, other: Self) -> bool:
        nano = self._other(other)
        return NotImplemented if nano is None else self._nano <= nano

    def __gt__(self, other: Self) -> bool:
        nano = self._other(other)
        return NotImplemented if nano is None else self._nano > nano

    def __ge__(self, other: Self) -> bool:
        nano = self._other(other)
        return NotImplemented if nano is None else self._nano >= nano

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._nano))

    def __bool__(self) -> bool:
        return self._nano != 0

    # -- immutability and pickling -----------------------------------------------------

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (type(self), (self.plain,))

    # -- pydantic ----------------------------------------------------------------------

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            cls,
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda amount: amount.plain, when_used="json"
            ),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {
            "anyOf": [
                {"type": "number", "minimum": 0, "maximum": MAX_UNITS},
                {"type": "string", "pattern": r"^\s*[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?\s*$"},
            ],
            "description": f'a non-negative {cls.SYMBOL}, e.g. 0.5 or "0.5"',
        }


class Epsilon(NanoAmount):
    """A pure-DP privacy loss ε. ``str(Epsilon("0.5")) == "ε=0.5"``."""

    __slots__ = ()
    SYMBOL: ClassVar[str] = "ε"


class Rho(NanoAmount):
    """A zero-concentrated DP privacy loss ρ. ``str(Rho("0.5")) == "ρ=0.5"``."""

    __slots__ = ()
    SYMBOL: ClassVar[str] = "ρ"


class Mechanism(StrEnum):
    """The noise of an answer: discrete Laplace (pure ε) or discrete Gaussian (ρ-zCDP)."""

    LAPLACE = "laplace"
    GAUSSIAN = "gaussian"


class Period(StrEnum):
    """How often an analyst's spending starts again from zero (at 00:00 UTC; weeks start on
    Monday, months on the 1st). Earlier charges stay in the ledger and the audit log."""

    NEVER = "never"
    DAILY = "daily"
    WEEKLY = "weekly"
    MONTHLY = "monthly"

    def start(self, now: datetime) -> datetime | None:
        """When the period containing ``now`` (UTC) began; None for NEVER."""
        day = datetime(now.year, now.month, now.day, tzinfo=UTC)
        if self is Period.DAILY:
            return day
        if self is Period.WEEKLY:
            return day - timedelta(days=day.weekday())
        if self is Period.MONTHLY:
            return day.replace(day=1)
        return None


#: δ amounts (what partition selection spends) are whole 10⁻¹⁵ units in the ledger: exact
#: sums, and far below any δ worth setting (a δ is rounded *up* to the next unit).
DELTA_UNITS_PER_ONE = 10**15


_MAX_SCALED_DIGITS = 40


def ceil_scaled(exact: Decimal, places: int) -> int:
    """⌈``exact`` × 10^``places``⌉ for a finite ``exact`` ≥ 0, computed exactly: unlike
    ``exact.scaleb(places)``, never rounded to the decimal context's 28 digits nor flushed
    to 0 by its exponent limits (``Decimal("1e-999999999999999999").scaleb(9)`` is 0), so
    a positive amount always comes to at least one unit."""
    if not exact.is_finite() or exact < 0:
        raise InvalidAmount(f"an amount must be a finite number of 0 or more, not {exact}")
    _, digits, exponent = exact.as_tuple()
    if not isinstance(exponent, int):  # (finite numbers have an int exponent)
        raise InvalidAmount(f"an amount must be a finite number of 0 or more, not {exact}")
    coefficient = int("".join(map(str, digits)) or "0")
    if coefficient == 0:
        return 0
    shift = exponent + places
    if shift + len(digits) > _MAX_SCALED_DIGITS:  # (callers bound amounts far below this)
        raise InvalidAmount(f"an amount of {exact} is far too large")
    if shift >= 0:
        return coefficient * int(10**shift)
    if -shift > len(digits):  # 0 < exact × 10^places < 1
        return 1
    return -(-coefficient // int(10 ** (-shift)))


def delta_units(delta: Decimal) -> int:
    """``delta`` in whole 10⁻¹⁵ units, rounded up (the conservative direction for a cost):
    any δ above 0 is at least one unit."""
    return ceil_scaled(delta, 15)


def delta_of_units(units: int) -> Decimal:
    """The exact δ of ``units`` 10⁻¹⁵ units (as stored in the ledger)."""
    if isinstance(units, bool) or not isinstance(units, int) or units < 0:
        raise InvalidAmount("a stored δ must be a non-negative integer of 10⁻¹⁵ units")
    return Decimal(units).scaleb(-15)


@dataclass(frozen=True)
class Cost:
    """What one query is charged: pure ε (Laplace answers), ρ (Gaussian answers) and δ
    (partition selection: releasing GROUP BY keys found in the data).

    ``delta`` is exact: rounded up to whole 10⁻¹⁵ units when the Cost is made."""

    epsilon: Epsilon
    rho: Rho
    delta: Decimal = Decimal(0)

    def __post_init__(self) -> None:
        exact = parse_delta(self.delta)
        object.__setattr__(self, "delta", delta_of_units(delta_units(exact)))

    @classmethod
    def pure(cls, epsilon: Epsilon) -> Cost:
        return cls(epsilon, Rho.zero())

    @classmethod
    def zcdp(cls, rho: Rho) -> Cost:
        return cls(Epsilon.zero(), rho)

    def with_delta(self, delta: Decimal) -> Cost:
        """The same cost, also spending ``delta`` (partition selection)."""
        return Cost(self.epsilon, self.rho, delta)

    @property
    def delta_units(self) -> int:
        """δ in whole 10⁻¹⁵ units (as stored in the ledger)."""
        return delta_units(self.delta)

    def is_zero(self) -> bool:
        return self.epsilon.is_zero() and self.rho.is_zero() and self.delta == 0

    def __str__(self) -> str:
        if self.rho.is_zero():
            text = str(self.epsilon)
        elif self.epsilon.is_zero():
            text = f"{self.rho} (zCDP)"
        else:
            text = f"{self.epsilon} and {self.rho} (zCDP)"
        if self.delta:
            text += f" and δ={format_delta(self.delta)} (partition selection)"
        return text


DEFAULT_DELTA = Decimal("0.000001")


def parse_delta(value: object) -> Decimal:
    """δ as an exact Decimal in [0, 1e-3]: 0 means pure ε only (no Gaussian answers)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
        raise InvalidAmount(f"δ must be a number such as 1e-6, not {type(value).__name__}")
    if isinstance(value, str) and "_" in value:  # Decimal would read 1_0e-7 as 1e-6
        raise InvalidAmount(f"δ must be a number such as 1e-6, not {value!r}")
    try:
        exact = Decimal(str(value).strip()) if isinstance(value, str | float) else Decimal(value)
    except InvalidOperation:
        raise InvalidAmount(f"δ must be a number such as 1e-6, not {value!r}") from None
    if not exact.is_finite() or not 0 <= exact <= Decimal("0.001"):
        raise InvalidAmount(f"δ must be between 0 and 0.001 (e.g. 1e-6), not {value!r}")
    return exact


def format_delta(delta: Decimal) -> str:
    """δ as people write it: ``1e-6``, ``2.5e-7``, ``0``."""
    if delta == 0:
        return "0"
    # A context wide enough that no δ is rounded or flushed to 0 (1e-999999999 stays itself).
    wide = Context(prec=max(len(delta.as_tuple().digits), 1), Emin=MIN_EMIN, Emax=MAX_EMAX)
    return format(delta.normalize(wide), "E").lower().replace("e-0", "e-")


#: The smallest non-zero ε an amount holds (one nano-unit).
SMALLEST_EPSILON = Decimal(1).scaleb(-9)
#: The smallest non-zero δ a budget may have: the ledger counts δ in these units, and no
#: partition selection can spend less.
SMALLEST_DELTA = Decimal(1).scaleb(-15)


def budget_epsilon(value: AmountInput) -> Epsilon:
    """An ε for a budget (a total, a per-query default or cap, a grant), as an admin or the
    configuration gives it. Unlike ``Epsilon(value)``, which rounds a cost *up* to the next
    nano-unit, a value that is not a whole number of nano-units is refused: rounding it up
    would silently make a budget larger than asked (1e-10 would become 1e-9)."""
    amount = Epsilon(value)
    exact = Decimal(str(value).strip()) if isinstance(value, str | float) else Decimal(value)
    if amount.as_decimal() == exact:
        return amount
    if exact < SMALLEST_EPSILON:
        raise InvalidAmount(
            f"{value} is below the smallest ε dpproxy keeps, 0.000000001 (1e-9); "
            "give 0.000000001 or more"
        )
    down = format(exact.quantize(SMALLEST_EPSILON, rounding=ROUND_FLOOR).normalize(), "f")
    raise InvalidAmount(
        f"{value} has more than 9 decimals; ε is kept exact to 0.000000001 (1e-9) and a "
        f"budget is never rounded up: give at most 9 decimals, e.g. {down}"
    )


def budget_delta(value: object) -> Decimal:
    """A δ for a budget: between 0 and 0.001 (``parse_delta``), and 0 or at least 1e-15 (the
    ledger's unit of δ: a smaller δ could fund no partition selection, and would be 0 as a
    float when Gaussian spending is converted to ε)."""
    delta = parse_delta(value)
    if 0 < delta < SMALLEST_DELTA:
        raise InvalidAmount(
            f"δ {value} is below the smallest δ dpproxy accounts, 1e-15; give 0 (pure ε "
            "only) or at least 1e-15"
        )
    return delta


class AnalystBudget(BaseModel):
    """One analyst's (ε, δ) budget.

    ``total``: all queries together (ε at the analyst's ``delta``); ``per_query_cap``: the
    most one query may ask for (None: only the total limits it); ``default_per_query``: the
    ε of a query when the session sets none. All positive, and ``default_per_query ≤
    per_query_cap ≤ total``. ``delta``: the δ at which spending is stated (0: pure ε only,
    Gaussian answers refused); ``mechanism``: the noise used when the session sets none;
    ``period``: how often spending starts again from zero (``total`` is per period).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    total: Epsilon
    per_query_cap: Epsilon | None = None
    default_per_query: Epsilon
    delta: Decimal = DEFAULT_DELTA
    mechanism: Mechanism = Mechanism.LAPLACE
    period: Period = Period.NEVER

    @field_validator("delta", mode="before")
    @classmethod
    def _check_delta(cls, value: object) -> Decimal:
        return parse_delta(value)

    @model_validator(mode="after")
    def _check_order(self) -> Self:
        if self.mechanism is Mechanism.GAUSSIAN and self.delta == 0:
            raise ValueError("a Gaussian default mechanism needs a delta greater than 0")
        for name in ("total", "per_query_cap", "default_per_query"):
            value = getattr(self, name)
            if value is not None and value.is_zero():
                raise ValueError(f"{name} must be greater than 0")
        cap = self.total if self.per_query_cap is None else self.per_query_cap
        if cap > self.total:
            raise ValueError(f"per_query_cap ({cap}) cannot exceed total ({self.total})")
        if self.default_per_query > cap:
            name = "total" if self.per_query_cap is None else "per_query_cap"
            raise ValueError(
                f"default_per_query ({self.default_per_query}) cannot exceed {name} ({cap})"
            )
        return self

    @property
    def effective_cap(self) -> Epsilon:
        """The most one query may spend: the cap, or the total when there is none."""
        return self.total if self.per_query_cap is None else self.per_query_cap
