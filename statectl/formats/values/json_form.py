"""The JSON form of decoded values (docs/values.md): numbers, ISO-8601 times, base64, ordering.

Times are formatted from integers for every year Java allows (no `datetime` range limit): the
civil calendar from days since the epoch (H. Hinnant's `civil_from_days`), seconds always
written, a fraction only when not zero, without its trailing zeros.
"""

from __future__ import annotations

import base64
import json
import math
from typing import Any

NANOS_PER_SECOND = 1_000_000_000
SECONDS_PER_DAY = 86_400
MILLIS_PER_DAY = SECONDS_PER_DAY * 1000


def float_json(value: float) -> float | str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def base64_json(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def json_text(value: Any) -> str:
    """Compact JSON text: how set elements and map keys are ordered."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def sorted_json(items: list[Any]) -> list[Any]:
    return sorted(items, key=json_text)


def map_json(pairs: list[tuple[Any, Any]]) -> Any:
    """An object when every key is a string, else `[key, value]` pairs sorted by key text."""
    if all(isinstance(k, str) for k, _ in pairs):
        return dict(pairs)
    return [[k, v] for k, v in sorted(pairs, key=lambda kv: json_text(kv[0]))]


# --- dates and times -----------------------------------------------------------------------------


def civil_from_days(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a day count since 1970-01-01, proleptic Gregorian."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def days_from_civil(year: int, month: int, day: int) -> int:
    """Inverse of `civil_from_days`."""
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def date_text(year: int, month: int, day: int) -> str:
    """ISO year as `java.time` prints it: four digits, a sign beyond 9999 or before 0."""
    if 0 <= year <= 9999:
        text = f"{year:04d}"
    elif year > 9999:
        text = f"+{year}"
    else:
        text = f"-{-year:04d}"
    return f"{text}-{month:02d}-{day:02d}"


def time_text(hour: int, minute: int, second: int, nanos: int) -> str:
    text = f"{hour:02d}:{minute:02d}:{second:02d}"
    if nanos:
        text += "." + f"{nanos:09d}".rstrip("0")
    return text


def days_json(days: int) -> str:
    return date_text(*civil_from_days(days))


def time_of_day_json(nanos_of_day: int) -> str:
    seconds, nanos = divmod(nanos_of_day, NANOS_PER_SECOND)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return time_text(hour, minute, second, nanos)


def epoch_nanos_json(nanos: int, zone: bool) -> str:
    """`2023-11-15T19:13:20.123Z` (`zone`) or `2024-01-01T00:21:00` from nanos since the epoch."""
    seconds, fraction = divmod(nanos, NANOS_PER_SECOND)
    return epoch_seconds_json(seconds, fraction, zone)


def epoch_seconds_json(seconds: int, nanos: int, zone: bool) -> str:
    days, second_of_day = divmod(seconds, SECONDS_PER_DAY)
    text = days_json(days) + "T" + time_of_day_json(second_of_day * NANOS_PER_SECOND + nanos)
    return text + "Z" if zone else text
