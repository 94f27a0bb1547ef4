"""Key-group range math for the rescale planner; the one copy lives in `formats.key_groups`."""

from statectl.formats.key_groups import (
    DEFAULT_LOWER_BOUND_MAX_PARALLELISM,
    UPPER_BOUND_MAX_PARALLELISM,
    check_parallelism,
    default_max_parallelism,
    key_group_range,
    operator_index_for_key_group,
)

__all__ = [
    "DEFAULT_LOWER_BOUND_MAX_PARALLELISM",
    "UPPER_BOUND_MAX_PARALLELISM",
    "check_parallelism",
    "default_max_parallelism",
    "key_group_range",
    "operator_index_for_key_group",
]
