"""What users find without reading the docs: `dir(statectl)` lists the API, `-V`, shell
completion, `--debug` wherever it is typed, and `plan --png` saying what it wrote."""

from __future__ import annotations

import statectl


def test_dir_lists_the_api_and_no_module_internals() -> None:
    names = dir(statectl)
    assert {"open", "rescale", "verify", "Savepoint", "StatectlError", "__version__"} <= set(names)
    assert set(names) == set(statectl.__all__)
    assert not {"Any", "TYPE_CHECKING", "annotations"} & set(names)
