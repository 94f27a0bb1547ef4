import pytest

from statectl.errors import StatectlError
from statectl.formats.key_groups import (
    default_max_parallelism,
    key_group_range,
    operator_index_for_key_group,
)


def test_ranges_match_flink_examples() -> None:
    assert [key_group_range(128, 3, i) for i in range(3)] == [(0, 42), (43, 85), (86, 127)]
    assert [key_group_range(128, 2, i) for i in range(2)] == [(0, 63), (64, 127)]
    assert [key_group_range(300, 4, i) for i in range(4)] == [
        (0, 74),
        (75, 149),
        (150, 224),
        (225, 299),
    ]


@pytest.mark.parametrize(("max_p", "p"), [(128, 1), (128, 3), (128, 7), (300, 11), (32768, 1000)])
def test_ranges_partition_all_key_groups_and_agree_with_operator_index(max_p: int, p: int) -> None:
    covered = []
    for index in range(p):
        start, end = key_group_range(max_p, p, index)
        covered.extend(range(start, end + 1))
        assert {operator_index_for_key_group(max_p, p, kg) for kg in range(start, end + 1)} == {
            index
        }
    assert covered == list(range(max_p))


@pytest.mark.parametrize(("max_p", "p"), [(128, 0), (128, 129), (40000, 2)])
def test_out_of_bounds_parallelism_is_refused(max_p: int, p: int) -> None:
    with pytest.raises(StatectlError):
        key_group_range(max_p, p, 0)


def test_default_max_parallelism() -> None:
    assert default_max_parallelism(1) == 128
    assert default_max_parallelism(100) == 256
    assert default_max_parallelism(86) == 256
    assert default_max_parallelism(85) == 128
    assert default_max_parallelism(30000) == 32768
