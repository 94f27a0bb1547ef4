"""Bytes ⇄ values, no IO (ARCHITECTURE.md).

Codecs travel to Spark's tasks inside the functions of a write (pickled by cloudpickle), and
many hold a `struct.Struct`, which pickle cannot take on its own: it is pickled here as the
format it was made from.
"""

import copyreg
import struct


def _struct_by_format(packer: struct.Struct) -> tuple[type[struct.Struct], tuple[str]]:
    return struct.Struct, (packer.format,)


copyreg.pickle(struct.Struct, _struct_by_format)
